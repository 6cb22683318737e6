"""Runs one untrusted process tree with a timeout, capped output, resource limits and a sandbox.

The child starts its own process group; on exit or timeout the whole group is killed. When the
runner is a child subreaper (`become_subreaper`), processes that escaped the group (a new
session, a double fork) are re-parented to the runner and killed as well, so nothing started by
a submission outlives its run. A tree that runs as a user of its own is also killed with one
`kill(-1)` as that user, which no fork bomb can outrun.

`Isolation` describes the sandbox, set up in the child between fork and exec: a network
namespace with only loopback, a mount namespace with private /tmp-like directories, paths
hidden behind empty tmpfs mounts and /proc limited to the tree's own processes, then a switch
to an unprivileged user. The runner decides what to ask for; `probe` tells it what works here.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
MAX_POLL_MS = 2**31 - 1  # poll() takes a C int of milliseconds: longer waits go in slices
IFREQ = struct.Struct("16sH22x")  # struct ifreq: the name, then ifr_flags in a 24-byte union
_libc = ctypes.CDLL(None, use_errno=True)
_subreaper = False
# Process groups of the trees running now, with their sandboxes, so a termination request
# can kill them.
_running: dict[int, Isolation] = {}
_on_termination: list[Callable[[], None]] = []


def become_subreaper() -> bool:
    """Orphans of our descendants get re-parented to us instead of init (Linux >= 3.4)."""
    global _subreaper
    try:
        _subreaper = _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except AttributeError:
        _subreaper = False
    return _subreaper


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies: a killed runner takes its tree along."""
    with contextlib.suppress(AttributeError):
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def make_undumpable() -> None:
    """Keeps processes of the same user out of /proc/<pid>/environ, fd and mem (and ptrace)."""
    with contextlib.suppress(AttributeError):
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def kill_everything_on_sigterm() -> None:
    """A cancelled runner (SIGTERM) kills every tree it runs, then exits."""

    def handler(signum: int, _frame: object) -> None:
        for pgid, isolation in list(_running.items()):
            _kill_user_of(isolation)
            kill_tree(pgid)
        for cleanup in list(_on_termination):
            with contextlib.suppress(Exception):
                cleanup()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def on_termination(cleanup: Callable[[], None]) -> Callable[[], None]:
    """Runs `cleanup` if a SIGTERM ends this process (os._exit skips `finally` blocks);
    returns the function that cancels it."""
    _on_termination.append(cleanup)
    return lambda: _on_termination.remove(cleanup)


class CappedBuffer:
    """Keeps the first and last `cap // 2` bytes of a stream: the start and the traceback."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {omitted} bytes omitted ...]\n".encode() if omitted > 0 else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


def _drain(stream: int, sink: CappedBuffer) -> threading.Thread:
    def pump() -> None:
        with os.fdopen(stream, "rb", buffering=0) as fh:
            while chunk := fh.read(65536):
                sink.write(chunk)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = None
    file_bytes: int = 1 << 30
    open_files: int = 4096
    cpu_seconds: int | None = None  # per process; SIGKILL once used up
    processes: int | None = None  # RLIMIT_NPROC counts every process of the user: sandbox only


@dataclass(frozen=True)
class Mask:
    """An empty tmpfs mounted over `path`; each of `keep` (below `path`) is bound back in place."""

    path: str
    mode: int = 0o755
    size_bytes: int = 1 << 20
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class Isolation:
    """What the tree is shut off from. The default changes nothing."""

    user: tuple[int, int] | None = None  # (uid, gid) to run as; needs root
    groups: tuple[int, ...] = ()  # the user's only supplementary groups
    private_user: bool = False  # nothing else runs as `user`, so kill(-1) as it is safe
    network: bool = False  # a network namespace of its own, with only loopback up
    masks: tuple[Mask, ...] = ()  # needs root
    hide_processes: bool = False  # /proc shows only processes the tree may inspect
    # False: the tree becomes `user` by itself (inside bubblewrap); it is still killed as it.
    switch_user: bool = True


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _set_limits(limits: Limits) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    if limits.processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))


def _loopback_up() -> None:
    """A new network namespace has `lo` down: torch.distributed needs 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        current = fcntl.ioctl(sock, SIOCGIFFLAGS, IFREQ.pack(b"lo", 0))
        flags = IFREQ.unpack(current)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, IFREQ.pack(b"lo", flags | IFF_UP))


def _map_own_ids() -> None:
    """In a user namespace of our own, stay who we are (unmapped ids cannot create files)."""
    uid, gid = os.geteuid(), os.getegid()
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _c_string(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    result = _libc.mount(
        _c_string(source), target.encode(), _c_string(fstype), flags, _c_string(data or None)
    )
    _check(result, f"mount {target}")


def _bind(fd: int, target: str) -> None:
    """Binds what `fd` points at: it was opened before the tmpfs above `target` hid it."""
    path = Path(target)
    if Path(f"/proc/self/fd/{fd}").is_dir():
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)


def _remount(isolation: Isolation) -> None:
    os.umask(0o022)  # the skeleton directories under each mask must be traversable
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount leaks to the host
    # Opened inside the new namespace, before any mask hides them.
    sources = {path: os.open(path, os.O_PATH) for m in isolation.masks for path in m.keep}
    for mask in sorted(isolation.masks, key=lambda m: m.path.count("/")):
        options = f"mode={mask.mode:o},size={mask.size_bytes}"
        _mount("tmpfs", mask.path, "tmpfs", MS_NOSUID | MS_NODEV, options)
        for path in mask.keep:
            _bind(sources[path], path)
    for fd in sources.values():
        os.close(fd)
    if isolation.hide_processes:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")


def _enter_namespaces(isolation: Isolation) -> None:
    mounts = bool(isolation.masks) or isolation.hide_processes
    flags = (CLONE_NEWNET if isolation.network else 0) | (CLONE_NEWNS if mounts else 0)
    if not flags:
        return
    unprivileged = os.geteuid() != 0
    _check(_libc.unshare(flags | (CLONE_NEWUSER if unprivileged else 0)), "unshare")
    if unprivileged:
        _map_own_ids()
    if isolation.network:
        _loopback_up()
    if mounts:
        _remount(isolation)


def _become(uid: int, gid: int, groups: tuple[int, ...]) -> None:
    os.setgroups(list(groups))
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _sandbox_child(limits: Limits, isolation: Isolation, cwd: Path) -> Callable[[], None]:
    parent = os.getpid()

    def preexec() -> None:
        die_with_parent()
        _set_limits(limits)
        _enter_namespaces(isolation)
        os.chdir(cwd)  # through the new mounts, if any
        if isolation.user is not None and isolation.switch_user:
            _become(*isolation.user, isolation.groups)
            die_with_parent()  # a change of credentials clears the parent-death signal
            if os.getppid() != parent:
                os._exit(1)  # the runner died before the signal was armed again

    return preexec


def probe(isolation: Isolation) -> str | None:
    """Tries the namespaces and mounts of `isolation` in a throw-away child: None if they work."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # no locks, no imports until _exit: safe after fork in a threaded process
        os.close(read_end)
        try:
            _enter_namespaces(isolation)
        except BaseException as exc:
            os.write(write_end, str(exc).encode()[:500] or b"failed")
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        error = reader.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return error or None


def kill_user(uid: int) -> None:
    """SIGKILLs every process of `uid` in one system call, as that user (never root)."""
    if uid == 0:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # every process we may signal, except ourselves
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _kill_user_of(isolation: Isolation) -> None:
    if isolation.private_user and isolation.user is not None:
        with contextlib.suppress(OSError):
            kill_user(isolation.user[0])


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None  # negative: killed by that signal; None: never finished
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    side_outputs: dict[str, str]  # what arrived on each side channel, by its variable name


@dataclass(frozen=True)
class _Proc:
    pid: int
    state: str
    ppid: int
    pgrp: int


def _process_table() -> list[_Proc]:
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The fields after the command name, which is in parentheses and may hold spaces.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2:
            table.append(_Proc(int(entry.name), fields[0], int(fields[1]), int(fields[2])))
    return table


def kill_tree(pgid: int, keep: Sequence[int] = ()) -> None:
    """Kills the process group, then any orphan re-parented to us, until none is left.

    An orphan is re-parented only once its parent has exited, which SIGKILL does not wait
    for: so the group is killed and watched until none of it runs any more, and only then is
    the last sweep for orphans final.
    """
    deadline = time.monotonic() + 5
    while True:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        if not _subreaper:
            return
        table = _process_table()
        running = [p for p in table if p.pgrp == pgid and p.state not in ("Z", "X")]
        stray = [p.pid for p in table if p.ppid == os.getpid() and p.pid not in keep]
        if (not running and not stray) or time.monotonic() > deadline:
            return
        for pid in stray:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        if not stray:
            time.sleep(0.002)


def _wait_for_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Waits until `proc` exits (True) or `timeout` seconds pass (False), without reaping it.

    A pidfd wakes us the moment the child exits; `Popen.wait(timeout)` polls with sleeps of
    up to 50 ms, which every run would pay on top of its own time.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: fall back to polling
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()  # not select.select: a pidfd may be above FD_SETSIZE
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(min(max(deadline - time.monotonic(), 0.0) * 1000, MAX_POLL_MS)):
            if time.monotonic() >= deadline:
                return False
        return True
    finally:
        os.close(pidfd)


def run_tree(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    output_cap: int,
    limits: Limits,
    side_channels: Sequence[str] = (),
    side_channel_cap: int = 1 << 20,
    isolation: Isolation | None = None,
) -> ProcessResult:
    """Runs `command` and everything it starts; kills all of it by `timeout` seconds.

    Each name in `side_channels` becomes an environment variable holding the number of a
    pipe's write end, inherited by the child only (the popcorn result pipe).
    """
    isolation = isolation or Isolation()
    pipes: dict[str, tuple[int, int]] = {name: os.pipe() for name in side_channels}
    child_env = dict(env)
    for name, (_, write_end) in pipes.items():
        child_env[name] = str(write_end)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stdout, stderr = CappedBuffer(output_cap), CappedBuffer(output_cap)
    channels = {name: CappedBuffer(side_channel_cap) for name in side_channels}
    began = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            pass_fds=[w for _, w in pipes.values()],
            start_new_session=True,
            preexec_fn=_sandbox_child(limits, isolation, cwd),
        )
    finally:
        # The child holds its copies; ours must close so readers see EOF when it exits.
        for fd in (out_w, err_w, *(w for _, w in pipes.values())):
            os.close(fd)
    _running[proc.pid] = isolation
    readers = [_drain(out_r, stdout), _drain(err_r, stderr)]
    readers += [_drain(pipes[name][0], channels[name]) for name in side_channels]
    timed_out = False
    try:
        timed_out = not _wait_for_exit(proc, timeout)
    finally:
        _kill_user_of(isolation)
        kill_tree(proc.pid, keep=(proc.pid,))  # Popen reaps its own child
        proc.wait()
        _running.pop(proc.pid, None)
    duration = time.monotonic() - began
    for reader in readers:
        reader.join(timeout=5)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration_s=duration,
        stdout=stdout.text(),
        stderr=stderr.text(),
        side_outputs={name: buf.text() for name, buf in channels.items()},
    )
