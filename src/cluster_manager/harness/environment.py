"""What the task's processes start with: the environment they see and the limits they run
under, the same for compiling and for every phase."""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path

from cluster_manager.core import protocol
from cluster_manager.core.arch import torch_arch_env
from cluster_manager.core.models import RunRequest
from cluster_manager.core.phases import Phase
from cluster_manager.harness import devices
from cluster_manager.sandbox import cgroups, process
from cluster_manager.sandbox.gpu_nodes import Roots, all_nodes
from cluster_manager.sandbox.plan import HOME_DIR, TMP_DIR, Sandbox

CPU_MARGIN_S = 10.0
# Only these variables reach the task's main: tokens and secrets in ours never do.
ENV_ALLOWLIST = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ROCM_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
)


def child_env(workdir: Path, request: RunRequest, sandbox: Sandbox) -> dict[str, str]:
    """What a phase's processes see: the allowlisted part of ours, a HOME and TMPDIR of their
    own, torch extension builds aimed at the GPU type's target, and last, the GPUs this runner
    was given (nothing before it can widen them)."""
    env = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    env.update(
        HOME=str(workdir / HOME_DIR),
        TMPDIR=str(workdir / TMP_DIR),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        # HOME is writable: a user site-packages there would run code in the next phase.
        PYTHONNOUSERSITE="1",
        **{protocol.ENV_GPUS: str(request.gpu_count)},
    )
    # OpenMP threads (torch's intra-op pool) otherwise spin for a while after each parallel
    # region, holding cores that the harness and the next step wait for.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if sandbox.user is not None:
        # The sandbox user may have no passwd entry; getpass.getuser() reads these first.
        env.update(USER="sandbox", LOGNAME="sandbox")
    env.update(torch_arch_env(request.arch))
    return devices.assigned(os.environ).pin(env)


def phase_env(
    request: RunRequest, phase: Phase, env: dict[str, str], timeout: float, extra: dict[str, str]
) -> dict[str, str]:
    """A phase's environment: the run's, `extra` (a profiler's), the time budget the task's
    main plans its benchmarks by, and in the secret phase only, the secret seed."""
    phase_env = {**env, **extra, protocol.ENV_TIME_BUDGET: f"{timeout * 0.8:g}"}
    if request.limits.benchmark_case_s is not None:
        phase_env[protocol.ENV_CASE_BUDGET] = f"{request.limits.benchmark_case_s:g}"
    if phase.secret and request.secret_seed is not None:
        phase_env[protocol.ENV_SEED] = str(request.secret_seed)
    return phase_env


def limits(request: RunRequest, timeout: float, sandbox: Sandbox) -> process.ResourceLimits:
    """The resource limits of a process tree that may run for `timeout` seconds: its cgroup's
    where the machine has them, and rlimits for what a cgroup does not cover."""
    cpus = len(os.sched_getaffinity(0))
    # CPU time grows at most `cpus` times as fast as wall time: an honest run under its
    # timeout never reaches this; anything that escaped the timeout still stops.
    cpu_seconds = math.ceil((timeout + CPU_MARGIN_S) * cpus)
    # Threads count too: torch starts about one per core in every process.
    budget = request.limits.processes or 256 + 64 * cpus
    grouped = not isinstance(cgroups.backend(), str)
    # RLIMIT_NPROC counts every process of the tree's real user id, also outside its user
    # namespace: a user of our own counts only the tree; the runner's user, its other
    # processes too, so they are added to the budget (a concurrent run of the same user
    # shares the headroom). Not enforced for root.
    processes = None
    if sandbox.user is not None:
        processes = budget
    elif not grouped and os.geteuid() != 0:
        # An ordinary user cannot raise it past its hard limit.
        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        processes = user_tasks(os.getuid()) + budget
        processes = processes if hard == resource.RLIM_INFINITY else min(processes, hard)
    # Without a cgroup the address space is all that bounds memory; GPU drivers map far
    # more of it than they use, so it applies only where there is no GPU.
    address_space = request.limits.memory_bytes
    if grouped or all_nodes(Roots()):
        address_space = None
    caps = cgroups.Caps(memory_bytes=request.limits.memory_bytes, processes=budget)
    return process.ResourceLimits(
        memory_bytes=address_space,
        file_bytes=request.limits.file_bytes,
        open_files=request.limits.open_files,
        cpu_seconds=cpu_seconds,
        processes=processes,
        group=caps if grouped else None,
    )


def user_tasks(uid: int) -> int:
    """Threads of every process whose real user id is `uid`: what RLIMIT_NPROC counts."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1"))
    return count
