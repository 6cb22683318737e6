"""Decides the sandbox of one run: the full one where the machine allows it, else what it can.

Full: bubblewrap shows the tree only its `SandboxSpec` (the run directory, the interpreter, its
packages and the toolchain read-only, GPU device nodes, private /tmp, /proc of its own
processes, loopback only), as a user id of the run's own on a root runner and as the runner's
user in a user namespace otherwise. Partial (no bubblewrap, or namespaces refused): the older
in-process isolation, as far as it goes, and `info` says what is missing and why; a ranked
score from such a run is held back (`core.sandboxing`). What the full sandbox shows of the
host is `view`'s to build; what the partial one's user may reach, and its masks, `masks`'.
"""

from __future__ import annotations

import dataclasses
import getpass
import itertools
import os
import pwd
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cluster_manager.core.sandboxing import (
    DISK_KEY,
    FULL,
    LIMITS_KEY,
    PARTIAL,
    RLIMITS_ONLY,
    SANDBOX_KEY,
    SANDBOX_REASON_KEY,
)
from cluster_manager.sandbox import bwrap, cgroups, seccomp
from cluster_manager.sandbox.gpu_nodes import GpuNodes, gpu_nodes
from cluster_manager.sandbox.masks import opened, plan_masks, reachable
from cluster_manager.sandbox.namespaces import Isolation
from cluster_manager.sandbox.namespaces import probe as probe_isolation
from cluster_manager.sandbox.process import ResourceLimits
from cluster_manager.sandbox.spec import SandboxSpec, View
from cluster_manager.sandbox.view import full_view, interpreter_paths, write_etc, write_proc

HOME_DIR = ".home"
TMP_DIR = ".tmp"
NOT_FILTERED = "not filtered (only bubblewrap loads the filter: the sandbox is partial)"
# Sandbox user ids: far above accounts and container ranges, then the runner's pid (< 2**22)
# and one of 64 slots for runs in the same process, below 2**31: concurrent runs never share
# one, so `kill(-1)` as it reaches only this run.
SANDBOX_UID_BASE = 0x7000_0000
SANDBOX_SLOTS = 64
NO_USER = "no unprivileged user id is mapped in this user namespace"
PRIVATE_MOUNTS = 5  # HOME, TMPDIR, /tmp, /var/tmp, /dev/shm: each a fifth of the disk cap
# What the full sandbox's filter adds where no cgroup counts memory (`seccomp.UNCOUNTED_MEMORY`).
UNCOUNTED_REFUSED = "memfd_create and System V IPC refused, tmpfs mounts within the memory cap"
GPU_NODES_KEY = "gpu_nodes"  # RunResult.system: which GPUs' device nodes the sandbox shows
_slots = itertools.count()


@dataclass(frozen=True)
class Sandbox:
    """How each process tree of one run is started: wrapped in `prefix`, set up by `isolation`."""

    isolation: Isolation = field(default_factory=Isolation)
    prefix: tuple[str, ...] = ()  # the bubblewrap command line, when the sandbox is full
    info: dict[str, str] = field(default_factory=dict)  # goes into RunResult.system
    # The same, with HOME and TMPDIR the run directory's own on the host instead of a tmpfs:
    # for the trees whose files the runner reads afterwards (the compiler's, the profiler's).
    keep_prefix: tuple[str, ...] = ()
    # memfd_create and System V IPC refused (ENOMEM): no cgroup would count their memory.
    refuses_uncounted: bool = False

    @property
    def user(self) -> tuple[int, int] | None:
        """The user id the tree runs as, when it is one of its own (not the runner's)."""
        return self.isolation.user

    def wrap(self, command: Sequence[str], *, keep_files: bool = False) -> list[str]:
        prefix = self.keep_prefix if keep_files and self.keep_prefix else self.prefix
        return [*prefix, *command]


def unsandboxed() -> Sandbox:
    """The task runs as the caller, with their files and network (`eval` without --sandbox)."""
    info = _info(PARTIAL, _user_name(), "not asked for")
    return Sandbox(info={**info, **_limits_info(None)})


def plan_sandbox(
    workdir: Path,
    tools: Sequence[str] = (),
    devices: Sequence[str] | None = None,
    disk_bytes: int | None = None,
    memory_bytes: int | None = None,
) -> Sandbox:
    """As much of the sandbox as this machine allows; `info` says what it got, and why not.
    `tools`: directories of tools outside the system's (a profiler) the tree may run.
    `devices`: the GPUs this runner was given explicitly (only their nodes are shown).
    `disk_bytes`: the run's writable space, shared by its five tmpfs mounts (HOME, TMPDIR,
    /tmp, /var/tmp, /dev/shm); where no cgroup counts their pages, no more than
    `memory_bytes`, the run's memory cap."""
    as_root = os.geteuid() == 0
    nodes = gpu_nodes(devices)
    writable = disk_bytes or PRIVATE_MOUNTS * ResourceLimits().file_bytes
    if memory_bytes is not None and not _memory_cgroup():
        writable = min(writable, memory_bytes)
    private_bytes = writable // PRIVATE_MOUNTS
    identity = _sandbox_user() if as_root else None
    if as_root and identity is None:
        sandbox = _partial(workdir, None, nodes, NO_USER, private_bytes)
    elif (problem := full_sandbox_problem()) is not None:
        sandbox = _partial(workdir, identity, nodes, problem, private_bytes)
    else:
        sandbox = _full(workdir, identity, nodes, tools, private_bytes)
    full = sandbox.info[SANDBOX_KEY] == FULL
    refuses = full and not _memory_cgroup() and seccomp.state() == seccomp.FILTERED
    sandbox = dataclasses.replace(sandbox, refuses_uncounted=refuses)
    sandbox.info.update(_limits_info(PRIVATE_MOUNTS * private_bytes if full else None, refuses))
    return sandbox


def _limits_info(disk_bytes: int | None, refuses_uncounted: bool = False) -> dict[str, str]:
    """What bounds the run's memory and processes, and its writable space."""
    backend = cgroups.backend()
    if isinstance(backend, str):
        limits = f"{RLIMITS_ONLY} ({backend})"
        limits += f"; {UNCOUNTED_REFUSED}" if refuses_uncounted else ""
    else:
        limits = f"{backend.name}: memory (shmem, tmpfs and page cache included), processes"
    if disk_bytes is None:
        disk = "the host's disk, each file capped (HOME and TMPDIR are the run directory's)"
    else:
        disk = f"{disk_bytes >> 20} MiB in all: HOME, TMPDIR, /tmp, /var/tmp, /dev/shm are tmpfs"
    return {LIMITS_KEY: limits, DISK_KEY: disk}


def _memory_cgroup() -> bool:
    """Whether each tree's memory, memfd and tmpfs pages included, is held by a cgroup."""
    return not isinstance(cgroups.backend(), str)


def full_sandbox_problem() -> str | None:
    """Why this machine cannot give runs the full sandbox, or None when it can."""
    as_root = os.geteuid() == 0
    problem = bwrap.probe(as_root)
    if problem is None and as_root and bwrap.setpriv_path() is None:
        problem = "setpriv (util-linux) is not installed"
    return problem


def limits_problem() -> str | None:
    """Why this machine bounds runs with rlimits only (no cgroup), or None when it need not."""
    backend = cgroups.backend()
    return f"limits: {RLIMITS_ONLY} ({backend})" if isinstance(backend, str) else None


def _full(
    workdir: Path,
    identity: tuple[int, int, bool] | None,
    nodes: GpuNodes,
    tools: Sequence[str] = (),
    private_bytes: int = 1 << 30,
) -> Sandbox:
    write_etc(workdir, identity)
    write_proc(workdir)
    scratch = (str(workdir / HOME_DIR), str(workdir / TMP_DIR))
    spec = SandboxSpec(view=full_view(workdir, nodes, scratch, tools, private_bytes))
    syscall_filter = seccomp.shared_fd(memory_cgroup=_memory_cgroup())
    isolation = Isolation(syscall_filter=syscall_filter)
    user_name = _user_name()
    if identity is not None:
        uid, gid, private_user = identity
        _hand_over(workdir, uid, gid)
        view = dataclasses.replace(spec.view, read_only=opened(spec.view.read_only, uid, gid))
        spec = SandboxSpec(view=view, user=(uid, gid), groups=_device_groups(nodes))
        # The user switch happens inside the sandbox (setpriv); the runner only needs to know
        # the id to kill what is left of it.
        isolation = Isolation(
            user=(uid, gid),
            private_user=private_user,
            switch_user=False,
            syscall_filter=syscall_filter,
        )
        user_name = f"uid {uid}" if private_user else "nobody"

    def prefix(view: View) -> tuple[str, ...]:
        return tuple(
            bwrap.argv(
                dataclasses.replace(spec, view=view),
                bwrap=bwrap.bwrap_path() or "bwrap",
                setpriv=bwrap.setpriv_path(),
                as_root=identity is not None,
                seccomp_fd=syscall_filter,
            )
        )

    info = _info(FULL, user_name, "")
    if nodes.nodes or nodes.hidden:
        info[GPU_NODES_KEY] = nodes.describe()
    kept = dataclasses.replace(spec.view, writable=spec.view.scratch, scratch=())
    return Sandbox(isolation, prefix(spec.view), info, keep_prefix=prefix(kept))


def _partial(
    workdir: Path,
    identity: tuple[int, int, bool] | None,
    nodes: GpuNodes,
    problem: str,
    private_bytes: int = 1 << 30,
) -> Sandbox:
    """The in-process isolation: a network namespace, and as root a user of the run's own with
    private /tmp and a limited /proc. The host's other files stay visible."""
    network_error = probe_isolation(Isolation(network=True))
    reasons = [problem, network_error and f"network: {network_error}"]
    if identity is None:
        who = "root" if os.geteuid() == 0 else _user_name()
        return Sandbox(Isolation(network=network_error is None), (), _info(PARTIAL, who, *reasons))
    uid, gid, private_user = identity
    _hand_over(workdir, uid, gid)
    paths = [*interpreter_paths(), str(workdir)]
    masks = plan_masks(paths, uid, gid, private_bytes)
    mounts_error: str | None = "the sandbox user cannot reach Python, torch or the run directory"
    if masks is not None:
        mounts_error = probe_isolation(Isolation(masks=masks, hide_processes=True))
        mounts_error = mounts_error and f"mounts: {mounts_error}"
    mounts = masks is not None and mounts_error is None
    # Without our mounts the user can still switch if everything it needs is open to it.
    user = (uid, gid) if mounts or reachable(paths, uid, gid) else None
    isolation = Isolation(
        user=user,
        groups=_device_groups(nodes) if user is not None else (),
        private_user=private_user and user is not None,
        network=network_error is None,
        masks=(masks or ()) if mounts else (),
        hide_processes=mounts,
    )
    name = "root" if user is None else f"uid {uid}" if private_user else "nobody"
    info = _info(PARTIAL, name, *reasons, mounts_error)
    if nodes.hidden:  # the host's /dev is the tree's: nothing hides the other GPUs' nodes
        info[GPU_NODES_KEY] = "all (a partial sandbox shows the host's /dev)"
    return Sandbox(isolation, (), info)


def _info(level: str, user: str, *reasons: str | None) -> dict[str, str]:
    info = {SANDBOX_KEY: level, "user": user}
    if level == FULL:
        info.update(filesystem="private", network="isolated", processes="own")
    info[seccomp.SYSCALLS_KEY] = seccomp.state() if level == FULL else NOT_FILTERED
    why = "; ".join(r for r in reasons if r)
    if why:
        info[SANDBOX_REASON_KEY] = why
    return info


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


def _device_groups(nodes: GpuNodes) -> tuple[int, ...]:
    """Groups that open GPU device nodes closed to others (ROCm's `render`, say): the sandbox
    user joins those, and no other group."""
    groups = set()
    for device in nodes.nodes:
        mode = device.stat().st_mode
        if mode & 0o006 != 0o006 and mode & 0o060 == 0o060:
            groups.add(device.stat().st_gid)
    return tuple(sorted(groups))


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return f"uid {os.geteuid()}"


def _hand_over(workdir: Path, uid: int, gid: int) -> None:
    """The run directory stays root's: readable by the sandbox user (its group), not writable,
    so nothing it plants there (a module shadowing ours) reaches the next phase. Only HOME and
    TMPDIR are its own."""
    for path in workdir.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)  # inside a directory only root and the sandbox may enter
        elif path.is_file() and not path.is_symlink():
            share(path)
    for name in (HOME_DIR, TMP_DIR):
        os.chown(workdir / name, uid, gid)
        (workdir / name).chmod(0o700)
    os.chown(workdir, 0, gid)
    workdir.chmod(0o750)


def share(path: Path, executable: bool = False) -> None:
    """Root's file, readable by whoever may enter the run directory."""
    os.chown(path, 0, 0)
    path.chmod(0o755 if executable or path.stat().st_mode & stat.S_IXUSR else 0o644)


def fresh_private_dirs(workdir: Path, sandbox: Sandbox) -> None:
    """Empties HOME and TMPDIR before each phase: nothing one phase plants (a poisoned cache,
    a startup file) reaches the next, which may be the ranked one."""
    for name in (HOME_DIR, TMP_DIR):
        directory = workdir / name
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(mode=0o700)
        if sandbox.user is not None:
            os.chown(directory, *sandbox.user)
