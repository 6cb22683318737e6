"""Decides the sandbox of one run: the full one where the machine allows it, else what it can.

Full: bubblewrap shows the tree only its `SandboxSpec` (the run directory, the interpreter, its
packages and the toolchain read-only, GPU device nodes, private /tmp, /proc of its own
processes, loopback only), as a user id of the run's own on a root runner and as the runner's
user in a user namespace otherwise. Partial (no bubblewrap, or namespaces refused): the older
in-process isolation, as far as it goes, and `info` says what is missing and why; a ranked
score from such a run is held back (`core.sandboxing`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import importlib.util
import itertools
import os
import pwd
import shutil
import site
import stat
import sys
from collections.abc import Iterable, Sequence
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
from cluster_manager.sandbox.namespaces import Isolation, Mask
from cluster_manager.sandbox.namespaces import probe as probe_isolation
from cluster_manager.sandbox.process import ResourceLimits
from cluster_manager.sandbox.spec import (
    ETC_FILES,
    KERNEL_VIEWS,
    PRIVATE_DIRS,
    PROC_FILES,
    SYSTEM_DIRS,
    SandboxSpec,
    View,
)

HOME_DIR = ".home"
TMP_DIR = ".tmp"
ETC_DIR = ".etc"  # the sandbox's own files of /etc, written by the runner
ETC_WRITTEN = ("passwd", "group", "hosts")
PROC_DIR = ".proc"  # the sandbox's own /proc/cmdline and /proc/meminfo
NOT_FILTERED = "not filtered (only bubblewrap loads the filter: the sandbox is partial)"
# Sandbox user ids: far above accounts and container ranges, then the runner's pid (< 2**22)
# and one of 64 slots for runs in the same process, below 2**31: concurrent runs never share
# one, so `kill(-1)` as it reaches only this run.
SANDBOX_UID_BASE = 0x7000_0000
SANDBOX_SLOTS = 64
NO_USER = "no unprivileged user id is mapped in this user namespace"
PRIVATE_MOUNTS = 5  # HOME, TMPDIR, /tmp, /var/tmp, /dev/shm: each a fifth of the disk cap
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
) -> Sandbox:
    """As much of the sandbox as this machine allows; `info` says what it got, and why not.
    `tools`: directories of tools outside the system's (a profiler) the tree may run.
    `devices`: the GPUs this runner was given explicitly (only their nodes are shown).
    `disk_bytes`: the run's writable space, shared by its five tmpfs mounts (HOME, TMPDIR,
    /tmp, /var/tmp, /dev/shm)."""
    as_root = os.geteuid() == 0
    nodes = gpu_nodes(devices)
    private_bytes = (disk_bytes or PRIVATE_MOUNTS * ResourceLimits().file_bytes) // PRIVATE_MOUNTS
    identity = _sandbox_user() if as_root else None
    if as_root and identity is None:
        sandbox = _partial(workdir, None, nodes, NO_USER, private_bytes)
    elif (problem := full_sandbox_problem()) is not None:
        sandbox = _partial(workdir, identity, nodes, problem, private_bytes)
    else:
        sandbox = _full(workdir, identity, nodes, tools, private_bytes)
    full = sandbox.info[SANDBOX_KEY] == FULL
    sandbox.info.update(_limits_info(PRIVATE_MOUNTS * private_bytes if full else None))
    return sandbox


def _limits_info(disk_bytes: int | None) -> dict[str, str]:
    """What bounds the run's memory and processes, and its writable space."""
    backend = cgroups.backend()
    if isinstance(backend, str):
        limits = f"{RLIMITS_ONLY} ({backend})"
    else:
        limits = f"{backend.name}: memory (shmem, tmpfs and page cache included), processes"
    if disk_bytes is None:
        disk = "the host's disk, each file capped (HOME and TMPDIR are the run directory's)"
    else:
        disk = f"{disk_bytes >> 20} MiB in all: HOME, TMPDIR, /tmp, /var/tmp, /dev/shm are tmpfs"
    return {LIMITS_KEY: limits, DISK_KEY: disk}


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
    _write_etc(workdir, identity)
    _write_proc(workdir)
    spec = SandboxSpec(view=_view(workdir, nodes, tools, private_bytes))
    syscall_filter = seccomp.shared_fd()
    isolation = Isolation(syscall_filter=syscall_filter)
    user_name = _user_name()
    if identity is not None:
        uid, gid, private_user = identity
        _hand_over(workdir, uid, gid)
        spec = SandboxSpec(view=spec.view, user=(uid, gid), groups=_device_groups(nodes))
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


def _view(
    workdir: Path, nodes: GpuNodes, tools: Sequence[str] = (), private_bytes: int = 1 << 30
) -> View:
    read_only: set[str] = {str(workdir), *(t for t in tools if Path(t).is_dir())}
    symlinks: list[tuple[str, str]] = []
    for path in SYSTEM_DIRS:
        host = Path(path)
        if host.is_symlink():
            symlinks.append((path, str(host.readlink())))
        elif host.is_dir():
            read_only.add(path)
    read_only.update(p for p in ETC_FILES if Path(p).exists())
    root = Path("/")
    kernel = sorted(str(p) for pattern in KERNEL_VIEWS for p in root.glob(pattern.lstrip("/")))
    read_only.update(kernel)
    read_only.update(_interpreter_paths())
    files = tuple((f"/etc/{name}", str(workdir / ETC_DIR / name)) for name in ETC_WRITTEN)
    files += tuple((path, str(workdir / PROC_DIR / Path(path).name)) for path in PROC_FILES)
    return View(
        read_only=_outermost(read_only),
        masked=_network_interfaces(kernel),
        scratch=(str(workdir / HOME_DIR), str(workdir / TMP_DIR)),
        devices=nodes.binds(),
        symlinks=tuple(symlinks),
        files=files,
        private_bytes=private_bytes,
    )


def _etc_files(identity: tuple[int, int, bool] | None) -> dict[str, str]:
    """passwd and group naming the sandbox's user, hosts naming only loopback."""
    uid, gid = (identity[0], identity[1]) if identity else (os.geteuid(), os.getegid())
    return {
        "passwd": f"root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}::/:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nsandbox:x:{gid}:\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    }


def _write_etc(workdir: Path, identity: tuple[int, int, bool] | None) -> None:
    etc = workdir / ETC_DIR
    etc.mkdir(mode=0o755, exist_ok=True)
    for name, text in _etc_files(identity).items():
        (etc / name).write_text(text, encoding="utf-8")


def _proc_files() -> dict[str, str]:
    """An empty boot command line, and a meminfo that shows all memory free and no swap:
    the host's own tell its configuration and, moment by moment, what other runs use."""
    total_kb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 1024
    fields = {"MemTotal": total_kb, "MemFree": total_kb, "MemAvailable": total_kb}
    fields |= dict.fromkeys(("Buffers", "Cached", "SwapCached", "SwapTotal", "SwapFree"), 0)
    fields["Shmem"] = 0
    meminfo = "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in fields.items())
    return {"cmdline": "\n", "meminfo": meminfo}


def _write_proc(workdir: Path) -> None:
    directory = workdir / PROC_DIR
    directory.mkdir(mode=0o755, exist_ok=True)
    for name, text in _proc_files().items():
        (directory / name).write_text(text, encoding="utf-8")


def _network_interfaces(bound: Sequence[str]) -> tuple[str, ...]:
    """The `net` directories of the host's network interfaces inside what is bound of /sys (a
    network card's PCI device): hidden, so its interface names and addresses are too."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        for link in Path("/sys/class/net").iterdir():
            directory = str(link.resolve().parent)
            if any(_under(directory, b) for b in bound):
                found.add(directory)
    return tuple(sorted(found))


def _interpreter_paths() -> list[str]:
    """The interpreter, its packages, torch, CUDA and this package: what the tree must import."""
    paths = [sys.base_prefix, sys.prefix, sys.exec_prefix, *site.getsitepackages()]
    paths.append(str(Path(__file__).resolve().parents[2]))  # the tree holding cluster_manager
    torch = importlib.util.find_spec("torch")
    if torch is not None and torch.submodule_search_locations:
        paths.extend(str(Path(p).parent) for p in torch.submodule_search_locations)
    paths.extend(os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if k in os.environ)
    return sorted({str(Path(p).resolve()) for p in paths if Path(p).exists()})


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
    paths = [*_interpreter_paths(), str(workdir)]
    masks = _plan_masks(paths, uid, gid, private_bytes)
    mounts_error: str | None = "the sandbox user cannot reach Python, torch or the run directory"
    if masks is not None:
        mounts_error = probe_isolation(Isolation(masks=masks, hide_processes=True))
        mounts_error = mounts_error and f"mounts: {mounts_error}"
    mounts = masks is not None and mounts_error is None
    # Without our mounts the user can still switch if everything it needs is open to it.
    user = (uid, gid) if mounts or _reachable(paths, uid, gid) else None
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
) -> tuple[Mask, ...] | None:
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
        Mask(
            path=anchor,
            mode=0o1777 if anchor in private else 0o755,
            size_bytes=private_bytes if anchor in private else 1 << 20,
            keep=_outermost(kept),
        )
        for anchor, kept in sorted(keep.items())
    )


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
