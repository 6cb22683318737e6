"""The runner entrypoint, the same on every launcher.

    python -m cluster_manager.harness.runner --request - --output result.json < request.json

(`--request -`, stdin, is what launchers use: the secret seed is never on disk.)

It takes a run request, materialises the task and the submission in a fresh private directory,
compiles CUDA sources, runs the task's main once per phase speaking the popcorn protocol, and
emits one versioned RunResult JSON. It imports nothing beyond `cluster_manager.core` and the
standard library, so a GPU machine needs only this package, Python and torch.

The entrypoint sandboxes every phase as far as the machine allows (`RunResult.system` says how
far): as root, the task's main runs as a user id of this run's own, with no network but
loopback, private /tmp, /var/tmp and /dev/shm, /proc showing only its own processes, and the
run directory readable but not writable (only HOME and TMPDIR are); without root, in a network
namespace of its own if unprivileged user namespaces work. CUDA tasks run their `eval.cu` in
the submission's process: that harness must unset POPCORN_SEED and POPCORN_FD before calling
the submission (ours does), yet the pipe stays open in that process, so nothing stops such a
submission from writing its own results; only the sandbox (user, namespaces) keeps it away from
other runs and the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import importlib.util
import itertools
import json
import math
import os
import pwd
import shutil
import site
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from cluster_manager.core import protocol, scoring
from cluster_manager.core.models import (
    CompileOutcome,
    Language,
    PhaseOutcome,
    RunRequest,
    RunResult,
    Verdict,
)
from cluster_manager.core.payload import decode_payload
from cluster_manager.core.plan import Phase, plan_phases
from cluster_manager.core.verdicts import judge_phase
from cluster_manager.harness import process
from cluster_manager.harness.sysinfo import system_info

BUILTIN_HARNESS = ("-m", "cluster_manager.harness.evaluate")
CUDA_BINARY = "eval.out"
HOME_DIR = ".home"
TMP_DIR = ".tmp"
# Sandbox user ids: far above accounts and container ranges, then the runner's pid (< 2**22)
# and one of 64 slots for runs in the same process, below 2**31: concurrent runs never share
# one, so `kill(-1)` as it reaches only this run.
SANDBOX_UID_BASE = 0x7000_0000
SANDBOX_SLOTS = 64
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108 - replaced by empty tmpfs
GPU_DEVICES = (("/dev", "nvidia*"), ("/dev", "kfd"), ("/dev/dri", "*"))
CPU_MARGIN_S = 10.0
NO_USER = "no unprivileged user id is mapped in this user namespace"
# Only these variables reach the task's main: tokens and secrets in ours never do.
ENV_ALLOWLIST = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ROCM_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
)

Progress = Callable[[dict[str, Any]], None]
_slots = itertools.count()


def _safe_path(root: Path, name: str) -> Path:
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"unsafe file name in run request: {name!r}")
    return root.joinpath(*pure.parts)


def materialise(request: RunRequest, workdir: Path) -> None:
    for file in request.task.files:
        target = _safe_path(workdir, file.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        content = request.submission_code if file.is_submission else file.content
        target.write_text(content or "", encoding="utf-8")


def _child_env(workdir: Path, request: RunRequest, sandbox: Sandbox) -> dict[str, str]:
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
    if sandbox.isolation.user is not None:
        # The sandbox user may have no passwd entry; getpass.getuser() reads these first.
        env.update(USER="sandbox", LOGNAME="sandbox")
    return env


# --- the sandbox ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sandbox:
    isolation: process.Isolation = field(default_factory=process.Isolation)
    info: dict[str, str] = field(default_factory=dict)  # goes into RunResult.system


def _sandbox_user() -> tuple[int, int, bool] | None:
    """A user id of this run's own when the id map allows it, else the shared `nobody`."""
    uid = SANDBOX_UID_BASE + os.getpid() * SANDBOX_SLOTS + next(_slots) % SANDBOX_SLOTS
    if _mapped("uid_map", uid) and _mapped("gid_map", uid):
        return uid, uid, True
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    if _mapped("uid_map", nobody.pw_uid) and _mapped("gid_map", nobody.pw_gid):
        return nobody.pw_uid, nobody.pw_gid, False
    return None


def _mapped(map_name: str, value: int) -> bool:
    """Inside a user namespace only the mapped ids exist; setuid to another one fails."""
    try:
        lines = Path(f"/proc/self/{map_name}").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        inside, _, count = (int(x) for x in line.split())
        if inside <= value < inside + count:
            return True
    return False


def _needed_paths(workdir: Path) -> list[str]:
    """What the sandbox user must reach: the interpreter, its packages, torch, CUDA, the run."""
    paths = [sys.base_prefix, sys.prefix, sys.exec_prefix, *site.getsitepackages()]
    paths.append(str(Path(__file__).resolve().parents[2]))  # the tree holding cluster_manager
    paths.extend(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    torch = importlib.util.find_spec("torch")
    if torch is not None and torch.submodule_search_locations:
        paths.extend(str(Path(p).parent) for p in torch.submodule_search_locations)
    paths.extend(os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if k in os.environ)
    paths.append(str(workdir))
    return sorted({str(Path(p).resolve()) for p in paths if Path(p).exists()})


def _may(path: str, uid: int, gid: int, bits: int) -> bool:
    """Mode bits only (as for a user that is neither root nor in any supplementary group)."""
    info = Path(path).stat()
    shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
    return (info.st_mode >> shift) & bits == bits


def _blocked_ancestor(path: str, uid: int, gid: int) -> str | None:
    parts = Path(path).parts
    for depth in range(1, len(parts)):
        ancestor = str(Path(*parts[:depth]))
        if not _may(ancestor, uid, gid, 0o1):
            return ancestor
    return None


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _outermost(paths: Iterable[str]) -> tuple[str, ...]:
    kept: list[str] = []
    for path in sorted(paths):
        if not any(_under(path, k) for k in kept):
            kept.append(path)
    return tuple(kept)


def _readable(path: str, uid: int, gid: int) -> bool:
    return _may(path, uid, gid, 0o5 if Path(path).is_dir() else 0o4)


def _reachable(paths: list[str], uid: int, gid: int) -> bool:
    return all(_blocked_ancestor(p, uid, gid) is None and _readable(p, uid, gid) for p in paths)


def _plan_masks(
    paths: list[str], uid: int, gid: int, private_bytes: int
) -> tuple[process.Mask, ...] | None:
    """Private dirs get an empty tmpfs; a closed directory on the way to a needed path (say a
    Python under /root) is replaced by one holding just that path. None: a path stays closed."""
    private = [str(Path(d).resolve()) for d in PRIVATE_DIRS if Path(d).is_dir()]
    keep: dict[str, set[str]] = {d: set() for d in private}
    for path in paths:
        anchor = next((d for d in private if _under(path, d)), None)
        anchor = anchor or _blocked_ancestor(path, uid, gid)
        if anchor == path or not _readable(path, uid, gid):
            return None
        if anchor is not None:
            keep.setdefault(anchor, set()).add(path)
    return tuple(
        process.Mask(
            path=anchor,
            mode=0o1777 if anchor in private else 0o755,
            size_bytes=private_bytes if anchor in private else 1 << 20,
            keep=_outermost(kept),
        )
        for anchor, kept in sorted(keep.items())
    )


def _plan_sandbox(workdir: Path) -> Sandbox:
    """As much of the sandbox as this machine allows; `info` says what it got, and why not."""
    network_error = process.probe(process.Isolation(network=True))
    network_error = network_error and f"network: {network_error}"
    if os.geteuid() != 0:
        info = _sandbox_info(network_error is None, _user_name(), False, [network_error])
        return Sandbox(process.Isolation(network=network_error is None), info)
    identity = _sandbox_user()
    if identity is None:
        info = _sandbox_info(network_error is None, "root", False, [network_error, NO_USER])
        return Sandbox(process.Isolation(network=network_error is None), info)
    return _plan_as_root(workdir, identity, network_error)


def _plan_as_root(
    workdir: Path, identity: tuple[int, int, bool], network_error: str | None
) -> Sandbox:
    uid, gid, private_user = identity
    _hand_over(workdir, uid, gid)
    paths = _needed_paths(workdir)
    masks = _plan_masks(paths, uid, gid, process.Limits().file_bytes)
    mounts_error = "the sandbox user cannot reach Python, torch or the run directory"
    if masks is not None:
        mounts_error = process.probe(process.Isolation(masks=masks, hide_processes=True))
        mounts_error = mounts_error and f"mounts: {mounts_error}"
    mounts = masks is not None and mounts_error is None
    # Without our mounts the user can still switch if everything it needs is open to it.
    user = (uid, gid) if mounts or _reachable(paths, uid, gid) else None
    isolation = process.Isolation(
        user=user,
        groups=_device_groups() if user is not None else (),
        private_user=private_user and user is not None,
        network=network_error is None,
        masks=(masks or ()) if mounts else (),
        hide_processes=mounts,
    )
    name = "root" if user is None else f"uid {uid}" if private_user else "nobody"
    errors = [network_error, mounts_error]
    return Sandbox(isolation, _sandbox_info(network_error is None, name, mounts, errors))


def _device_groups() -> tuple[int, ...]:
    """Groups that open GPU device nodes closed to others (ROCm's `render`, say): the sandbox
    user joins those, and no other group."""
    groups = set()
    for directory, pattern in GPU_DEVICES:
        for device in Path(directory).glob(pattern):
            mode = device.stat().st_mode
            if mode & 0o006 != 0o006 and mode & 0o060 == 0o060:
                groups.add(device.stat().st_gid)
    return tuple(sorted(groups))


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return f"uid {os.geteuid()}"


def _sandbox_info(
    network: bool, user: str, private_fs: bool, errors: list[str | None]
) -> dict[str, str]:
    info = {
        "network": "isolated" if network else "shared",
        "user": user,
        "filesystem": "private" if private_fs else "shared",
    }
    if any(errors):
        info["sandbox_error"] = "; ".join(e for e in errors if e)
    return info


def _hand_over(workdir: Path, uid: int, gid: int) -> None:
    """The run directory stays root's: readable by the sandbox user (its group), not writable,
    so nothing it plants there (a module shadowing ours) reaches the next phase. Only HOME and
    TMPDIR are its own."""
    for path in workdir.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)  # inside a directory only root and the sandbox may enter
        elif path.is_file() and not path.is_symlink():
            _share(path)
    for name in (HOME_DIR, TMP_DIR):
        os.chown(workdir / name, uid, gid)
        (workdir / name).chmod(0o700)
    os.chown(workdir, 0, gid)
    workdir.chmod(0o750)


def _share(path: Path, executable: bool = False) -> None:
    """Root's file, readable by whoever may enter the run directory."""
    os.chown(path, 0, 0)
    path.chmod(0o755 if executable or path.stat().st_mode & stat.S_IXUSR else 0o644)


def _limits(request: RunRequest, timeout: float, sandbox: Sandbox) -> process.Limits:
    cpus = len(os.sched_getaffinity(0))
    # CPU time grows at most `cpus` times as fast as wall time: an honest run under its
    # timeout never reaches this; anything that escaped the timeout still stops.
    cpu_seconds = math.ceil((timeout + CPU_MARGIN_S) * cpus)
    # RLIMIT_NPROC counts every process of the user: it can only apply to a user of our own.
    # Threads count too: torch starts about one per core in every process.
    processes = None
    if sandbox.isolation.user is not None:
        processes = request.limits.processes or 256 + 64 * cpus
    return process.Limits(
        memory_bytes=request.limits.memory_bytes,
        file_bytes=request.limits.file_bytes,
        open_files=request.limits.open_files,
        cpu_seconds=cpu_seconds,
        processes=processes,
    )


def compile_cuda(
    request: RunRequest, workdir: Path, env: dict[str, str], sandbox: Sandbox | None = None
) -> CompileOutcome:
    """Compiles as the sandbox user into its TMPDIR; the binary then becomes root's, read-only."""
    sandbox = sandbox or Sandbox()
    cuda = request.task.cuda
    assert cuda is not None
    built = f"{TMP_DIR}/{CUDA_BINARY}"
    command = [
        os.environ.get("CLUSTER_MANAGER_NVCC", "nvcc"),
        *cuda.compile_flags,
        *(f"-I{d}" for d in cuda.include_dirs),
        *(f"-D{k}={v}" for k, v in cuda.defines.items()),
        *cuda.sources,
        "-o",
        built,
    ]
    if shutil.which(command[0], path=env.get("PATH")) is None:
        return CompileOutcome(False, tuple(command), f"{command[0]} not found on PATH", 0.0)
    result = process.run_tree(
        command,
        cwd=workdir,
        env=env,
        timeout=request.limits.compile_timeout,
        output_cap=request.limits.output_bytes,
        limits=_limits(request, request.limits.compile_timeout, sandbox),
        isolation=sandbox.isolation,
    )
    if result.exit_code == 0 and (workdir / built).is_file():
        (workdir / built).replace(workdir / CUDA_BINARY)
        if sandbox.isolation.user is not None:
            _share(workdir / CUDA_BINARY, executable=True)  # the submission cannot swap it
    output = (result.stdout + result.stderr).strip()
    if result.timed_out:
        output += f"\ncompilation exceeded {request.limits.compile_timeout:g} s"
    return CompileOutcome(
        success=result.exit_code == 0,
        command=tuple(command),
        output=output,
        duration_s=round(result.duration_s, 3),
    )


def _main_command(request: RunRequest, mode: str, tests_file: str) -> list[str]:
    task = request.task
    if task.lang is Language.CUDA:
        return [f"./{CUDA_BINARY}", mode, tests_file]
    if mode == "script":
        return [sys.executable, request.submission_name]
    if task.main is None:
        return [sys.executable, *BUILTIN_HARNESS, mode, tests_file]
    return [sys.executable, task.main, mode, tests_file]


def run_phase(
    request: RunRequest,
    phase: Phase,
    workdir: Path,
    env: dict[str, str],
    sandbox: Sandbox | None = None,
) -> PhaseOutcome:
    sandbox = sandbox or Sandbox()
    tests_file = f".cases-{phase.mode}.txt"
    (workdir / tests_file).write_text(protocol.format_tests_file(phase.cases), encoding="utf-8")
    if sandbox.isolation.user is not None:
        _share(workdir / tests_file)
    timeout = request.task.timeout_for(phase.mode)
    phase_env = dict(env)
    phase_env[protocol.ENV_TIME_BUDGET] = f"{timeout * 0.8:g}"
    if phase.secret and request.secret_seed is not None:
        phase_env[protocol.ENV_SEED] = str(request.secret_seed)
    result = process.run_tree(
        _main_command(request, phase.mode, tests_file),
        cwd=workdir,
        env=phase_env,
        timeout=timeout + request.limits.grace,
        output_cap=request.limits.output_bytes,
        limits=_limits(request, timeout + request.limits.grace, sandbox),
        side_channels=[protocol.ENV_FD],
        isolation=sandbox.isolation,
    )
    judgement = judge_phase(
        phase.mode,
        case_count=len(phase.cases),
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        timeout_s=timeout,
        result=protocol.parse_result_lines(result.side_outputs[protocol.ENV_FD]),
    )
    message = judgement.message
    if judgement.verdict is Verdict.RUNTIME_ERROR and result.stderr.strip():
        message += f" ({result.stderr.strip().splitlines()[-1][:300]})"
    return PhaseOutcome(
        name=phase.mode,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=round(result.duration_s, 3),
        stdout=result.stdout,
        stderr=result.stderr,
        verdict=judgement.verdict,
        message=message,
        tests=judgement.tests,
        benchmarks=judgement.benchmarks,
    )


def _score(request: RunRequest, phases: list[PhaseOutcome]) -> tuple[float | None, str]:
    """The score, or why the reported timings cannot be one (a main that reported 0 ns)."""
    ranked = [p for p in phases if p.name == "leaderboard" and p.verdict is Verdict.PASSED]
    if not ranked:
        return None, ""
    means = [b.mean for b in ranked[0].benchmarks]
    try:
        return scoring.score_seconds(means, request.task.ranking_by), ""
    except ValueError as exc:
        return None, f"leaderboard: unusable timings ({exc})"


@contextlib.contextmanager
def _run_directory() -> Iterator[Path]:
    """A fresh private directory, removed at the end, also when a SIGTERM cancels the run."""
    with tempfile.TemporaryDirectory(prefix="cm-run-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o700)
        forget = process.on_termination(lambda: shutil.rmtree(workdir, ignore_errors=True))
        try:
            yield workdir
        finally:
            forget()


def run(
    request: RunRequest, *, progress: Progress | None = None, isolate: bool = False
) -> RunResult:
    """Runs the request to the end. Never raises: our own failures become `internal_error`.

    `isolate` sandboxes the task's main as far as this machine allows (the entrypoint always
    asks for it); without it the main runs as this process's user, with its network.
    """
    notify = progress or (lambda event: None)
    began = time.monotonic()
    durations: dict[str, float] = {}
    try:
        system = system_info()
        with _run_directory() as workdir:
            materialise(request, workdir)
            for name in (HOME_DIR, TMP_DIR):
                (workdir / name).mkdir(mode=0o700)
            sandbox = _plan_sandbox(workdir) if isolate else Sandbox()
            system.update(sandbox.info or _sandbox_info(False, _user_name(), False, []))
            env = _child_env(workdir, request, sandbox)
            durations["materialise"] = round(time.monotonic() - began, 3)
            compilation = None
            if request.task.lang is Language.CUDA:
                notify({"event": "compile"})
                compilation = compile_cuda(request, workdir, env, sandbox)
                durations["compile"] = compilation.duration_s
                if not compilation.success:
                    return RunResult(
                        passed=False,
                        verdict=Verdict.COMPILE_ERROR,
                        mode=request.mode,
                        message=f"compilation failed: {_tail_line(compilation.output)}",
                        compilation=compilation,
                        system=system,
                        durations=_total(durations, began),
                    )
            phases: list[PhaseOutcome] = []
            planned = plan_phases(request)
            for phase in planned:
                notify({"event": "phase", "phase": phase.mode, "cases": len(phase.cases)})
                outcome = run_phase(request, phase, workdir, env, sandbox)
                durations[phase.mode] = outcome.duration_s
                phases.append(outcome)
                notify({"event": "phase_done", "phase": phase.mode, "verdict": outcome.verdict})
                if outcome.verdict is not Verdict.PASSED:
                    break
    except Exception as exc:
        return RunResult(
            passed=False,
            verdict=Verdict.INTERNAL_ERROR,
            mode=request.mode,
            message=f"internal error in the runner: {exc!r}",
            phases=(),
            system={"traceback": traceback.format_exc()[-4000:]},
            durations=_total(durations, began),
        )
    failed = next((p for p in phases if p.verdict is not Verdict.PASSED), None)
    passed = failed is None and len(phases) == len(planned)
    verdict = Verdict.PASSED if failed is None else failed.verdict
    message = "; ".join(p.message for p in phases) if failed is None else failed.message
    score, unusable = _score(request, phases) if passed else (None, "")
    if unusable:
        passed, verdict, message = False, Verdict.RUNTIME_ERROR, unusable
    return RunResult(
        passed=passed,
        verdict=verdict,
        mode=request.mode,
        message=message,
        phases=tuple(phases),
        compilation=compilation,
        score=score,
        system=system,
        durations=_total(durations, began),
    )


def _tail_line(text: str) -> str:
    errors = [ln for ln in text.splitlines() if "error" in ln.lower()]
    return (errors[0] if errors else (text.strip().splitlines() or [""])[-1])[:300]


def _total(durations: dict[str, float], began: float) -> dict[str, float]:
    return {**durations, "total": round(time.monotonic() - began, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one request and write its RunResult JSON.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--request", default="-", help="request JSON file, '-' for stdin")
    source.add_argument(
        "--payload", help="file holding the request as an encoded payload (core.payload)"
    )
    parser.add_argument("--output", default="-", help="result JSON file, '-' for stdout")
    parser.add_argument(
        "--progress", action="store_true", help="write progress events as JSON lines to stderr"
    )
    parser.add_argument(
        "--no-sandbox", action="store_true", help="run the task as this user, with its network"
    )
    args = parser.parse_args(argv)
    # Before reading the request: its secret seed must not be readable through /proc.
    process.make_undumpable()
    process.become_subreaper()
    process.kill_everything_on_sigterm()
    try:
        if args.payload:
            request = decode_payload(Path(args.payload).read_text("utf-8"))
        else:
            raw = sys.stdin.read() if args.request == "-" else Path(args.request).read_text("utf-8")
            request = RunRequest.from_json(json.loads(raw))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"invalid run request: {exc}", file=sys.stderr)
        return 2

    def progress(event: dict[str, Any]) -> None:
        if args.progress:
            print(json.dumps(event, default=str), file=sys.stderr, flush=True)

    result = json.dumps(run(request, progress=progress, isolate=not args.no_sandbox).to_json())
    if args.output == "-":
        print(result)
    else:
        Path(args.output).write_text(result, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
