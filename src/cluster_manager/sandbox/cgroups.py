"""A cgroup of its own for each process tree: memory that rlimits do not count (memfd, shmem,
tmpfs, the page cache it dirties), swap and processes, capped as one.

Two backends, found once per process, or the reason neither works here:
- cgroup v2: children of a delegated cgroup. `CLUSTER_MANAGER_CGROUP` names one (made and
  handed to the runner's user by the operator); else, as root, `cluster-manager` at the top of
  our cgroup namespace; else, as an ordinary user, systemd's delegation to
  `user@UID.service` where it is ours to write (the runner must run inside it).
- cgroup v1 (the memory and pids controllers): children of our own cgroups, where we may
  write them (root).
The tree joins its cgroup in the child, before it runs anything (`Group.join`), and the cgroup
is emptied and removed when the tree is done.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SETTING = "CLUSTER_MANAGER_CGROUP"  # a delegated cgroup v2 directory, or `off`
V2_MOUNT = Path("/sys/fs/cgroup")
OWN_DIR = "cluster-manager"
CONTROLLERS = ("memory", "pids")
KILL_WAIT_S = 5.0
_serial = itertools.count()


@dataclass(frozen=True)
class Caps:
    memory_bytes: int | None = None  # memory and swap together; None: uncapped
    processes: int | None = None  # threads included


@dataclass(frozen=True)
class Usage:
    """What the tree ran into, read before its cgroup is removed."""

    oom_kills: int = 0
    process_limit_hits: int = 0
    peak_bytes: int | None = None


class Group(Protocol):
    def join(self) -> None:
        """Moves the calling process in; run in the child between fork and exec."""

    def kill(self) -> None:
        """SIGKILLs everything inside until it is empty."""

    def close(self) -> Usage:
        """Kills what is left, reads the usage and removes the cgroup."""


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    def create(self, caps: Caps) -> Group: ...


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read_keyed(path: Path, key: str) -> int:
    """A value of a `key value` file (memory.events, pids.events); 0 if absent."""
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _read_int(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return None


def _pids(procs: Path) -> list[int]:
    with contextlib.suppress(OSError, ValueError):
        return [int(p) for p in procs.read_text().split()]
    return []


def _kill_all(procs_files: Sequence[Path], kill_file: Path | None = None) -> None:
    """Until no process is left: one write to cgroup.kill where the kernel has it (5.14),
    else SIGKILL to each process listed, again while a fork races the listing."""
    if kill_file is not None and kill_file.exists():
        with contextlib.suppress(OSError):
            _write(kill_file, "1")
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        pids = [p for f in procs_files for p in _pids(f)]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _remove(directory: Path) -> None:
    """rmdir fails while a killed process is still exiting: retry for a moment."""
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
            time.sleep(0.01)


def _run_name() -> str:
    return f"run-{os.getpid()}-{next(_serial)}"


def _sweep(base: Path) -> None:
    """Removes the empty cgroups of runners that died (SIGKILL skips our cleanup)."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            parts = entry.name.split("-")
            ours = len(parts) == 3 and parts[0] == "run" and parts[1].isdigit()
            if ours and not Path(f"/proc/{parts[1]}").exists():
                with contextlib.suppress(OSError):
                    entry.rmdir()


@dataclass
class V2Group:
    directory: Path

    def join(self) -> None:
        _write(self.directory / "cgroup.procs", str(os.getpid()))

    def kill(self) -> None:
        _kill_all([self.directory / "cgroup.procs"], self.directory / "cgroup.kill")

    def close(self) -> Usage:
        self.kill()
        usage = Usage(
            oom_kills=_read_keyed(self.directory / "memory.events", "oom_kill"),
            process_limit_hits=_read_keyed(self.directory / "pids.events", "max"),
            peak_bytes=_read_int(self.directory / "memory.peak"),
        )
        _remove(self.directory)
        return usage


@dataclass(frozen=True)
class V2Backend:
    base: Path  # a cgroup whose subtree_control holds memory and pids
    name: str = "cgroup v2"

    def create(self, caps: Caps) -> Group:
        directory = self.base / _run_name()
        directory.mkdir()
        try:
            if caps.memory_bytes is not None:
                _write(directory / "memory.max", str(caps.memory_bytes))
                _write(directory / "memory.swap.max", "0")
                # Page cache and tmpfs are reclaimed before anything is killed.
                with contextlib.suppress(OSError):
                    _write(directory / "memory.oom.group", "0")
            if caps.processes is not None:
                _write(directory / "pids.max", str(caps.processes))
        except OSError:
            _remove(directory)
            raise
        return V2Group(directory)


@dataclass
class V1Group:
    memory: Path
    pids: Path

    def join(self) -> None:
        pid = str(os.getpid())
        _write(self.memory / "cgroup.procs", pid)
        _write(self.pids / "cgroup.procs", pid)

    def kill(self) -> None:
        _kill_all([self.memory / "cgroup.procs", self.pids / "cgroup.procs"])

    def close(self) -> Usage:
        self.kill()
        usage = Usage(
            oom_kills=_read_keyed(self.memory / "memory.oom_control", "oom_kill"),
            process_limit_hits=_read_keyed(self.pids / "pids.events", "max"),
            peak_bytes=_read_int(self.memory / "memory.max_usage_in_bytes"),
        )
        _remove(self.memory)
        _remove(self.pids)
        return usage


@dataclass(frozen=True)
class V1Backend:
    memory_base: Path
    pids_base: Path
    name: str = "cgroup v1"

    def create(self, caps: Caps) -> Group:
        name = _run_name()
        group = V1Group(self.memory_base / name, self.pids_base / name)
        group.memory.mkdir()
        try:
            group.pids.mkdir()
            if caps.memory_bytes is not None:
                _write(group.memory / "memory.limit_in_bytes", str(caps.memory_bytes))
                swap = group.memory / "memory.memsw.limit_in_bytes"
                if swap.exists():  # the kernel accounts swap: none beyond the memory cap
                    _write(swap, str(caps.memory_bytes))
            if caps.processes is not None:
                _write(group.pids / "pids.max", str(caps.processes))
        except OSError:
            _remove(group.memory)
            _remove(group.pids)
            raise
        return group


def _own_cgroups() -> dict[str, str]:
    """Our cgroup path per controller ("" for the v2 hierarchy)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path
    return found


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount point, root within the hierarchy, options) of each cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            dash = fields.index("-")
            fstype, options = fields[dash + 1], set(fields[dash + 3].split(","))
            if fstype in ("cgroup", "cgroup2"):
                found.append((fstype, fields[4], fields[3], options))
    return found


def _inside(mount: str, root: str, path: str) -> Path:
    """Where cgroup `path` (as /proc/self/cgroup says it) is under a mount of `root`."""
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(mount) / relative.lstrip("/")


def _has_controllers(directory: Path) -> bool:
    with contextlib.suppress(OSError):
        return set(CONTROLLERS) <= set((directory / "cgroup.controllers").read_text().split())
    return False


def _delegate(directory: Path) -> None:
    """Turns memory and pids on for the children of `directory`."""
    enabled = set((directory / "cgroup.subtree_control").read_text().split())
    missing = [c for c in CONTROLLERS if c not in enabled]
    if missing:
        _write(directory / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))


def _v2_base() -> tuple[Path | None, str]:
    """A cgroup v2 directory to create runs' cgroups in, or why there is none."""
    mount = next((m for t, m, _, _ in _mounts() if t == "cgroup2"), None)
    if mount is None:
        return None, "no cgroup v2 hierarchy is mounted"
    top = Path(mount)
    if not _has_controllers(top):
        return None, f"the cgroup v2 hierarchy at {top} has no memory and pids controllers"
    configured = os.environ.get(SETTING)
    uid = os.geteuid()
    if configured:
        base = Path(configured)
    elif uid == 0:
        base = top
    else:  # systemd's delegation to the user's manager
        base = top / "user.slice" / f"user-{uid}.slice" / f"user@{uid}.service"
    if not base.is_dir():
        return None, f"{base} does not exist (no cgroup delegated to this user)"
    if not os.access(base / "cgroup.subtree_control", os.W_OK) or not os.access(base, os.W_OK):
        return None, f"{base} is not delegated to this user (not writable)"
    try:
        if configured:
            _delegate(base)
            return base, ""
        own = base / OWN_DIR
        _delegate(base)
        own.mkdir(exist_ok=True)
        _delegate(own)
        return own, ""
    except OSError as exc:
        return None, f"cannot enable memory and pids under {base}: {exc.strerror}"


def _v1_backend() -> tuple[V1Backend | None, str]:
    own = _own_cgroups()
    bases: dict[str, Path] = {}
    for controller in CONTROLLERS:
        mount = next((m for t, m, _, o in _mounts() if t == "cgroup" and controller in o), None)
        root = next((r for t, _, r, o in _mounts() if t == "cgroup" and controller in o), "/")
        if mount is None or controller not in own:
            return None, f"no cgroup v1 {controller} controller is mounted"
        parent = _inside(mount, root, own[controller])
        if not os.access(parent, os.W_OK):
            return None, f"the cgroup v1 {controller} hierarchy is not writable by this user"
        try:
            (parent / OWN_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            return None, f"cannot create a cgroup v1 {controller} group: {exc.strerror}"
        bases[controller] = parent / OWN_DIR
    return V1Backend(bases["memory"], bases["pids"]), ""


def _works(backend: Backend) -> str | None:
    """Creates a capped cgroup and moves a forked child into it: None if all of that works."""
    try:
        group = backend.create(Caps(memory_bytes=64 << 20, processes=16))
    except OSError as exc:
        return f"{backend.name}: cannot create a capped cgroup: {exc.strerror}"
    pid = os.fork()
    if pid == 0:  # only what is safe after fork in a threaded process
        code = 0
        try:
            group.join()
        except OSError as exc:
            code = exc.errno or 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    group.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        hint = ""
        if isinstance(backend, V2Backend) and os.geteuid() != 0:
            hint = f" (the runner must run inside {backend.base.parent}, e.g. `systemd-run --user`)"
        why = os.strerror(code)
        return f"{backend.name}: cannot move a process into a run's cgroup: {why}{hint}"
    return None


@functools.cache
def backend() -> Backend | str:
    """The backend that works here, or why none does (probed once per process)."""
    if os.environ.get(SETTING) == "off":
        return f"{SETTING}=off"
    reasons = []
    v2, why = _v2_base()
    if v2 is not None:
        _sweep(v2)
        problem = _works(V2Backend(v2))
        if problem is None:
            return V2Backend(v2)
        why = problem
    reasons.append(why)
    v1, why = _v1_backend()
    if v1 is not None:
        _sweep(v1.memory_base)
        _sweep(v1.pids_base)
        problem = _works(v1)
        if problem is None:
            return v1
        why = problem
    reasons.append(why)
    return "; ".join(reasons)


def joiner(group: Group | None) -> Callable[[], None]:
    """What the child runs first: the join, or nothing without a cgroup."""
    return group.join if group is not None else (lambda: None)
