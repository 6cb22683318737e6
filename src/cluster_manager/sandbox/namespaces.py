"""The in-process isolation of a tree, set up in the child between fork and exec.

This is what a runner falls back on when bubblewrap cannot run (`sandbox: partial`): a network
namespace with only loopback, a mount namespace with private /tmp-like directories, paths
hidden behind empty tmpfs mounts and /proc limited to the tree's own processes, then a switch
to an unprivileged user. The runner decides what to ask for; `probe` tells it what works here.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

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
IFREQ = struct.Struct("16sH22x")  # struct ifreq: the name, then ifr_flags in a 24-byte union
libc = ctypes.CDLL(None, use_errno=True)


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
    # The memfd holding the syscall filter that bubblewrap loads (`seccomp.shared_fd`): the
    # child inherits it under the same number, as a description of its own.
    syscall_filter: int | None = None


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


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
    result = libc.mount(
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


def enter_namespaces(isolation: Isolation) -> None:
    mounts = bool(isolation.masks) or isolation.hide_processes
    flags = (CLONE_NEWNET if isolation.network else 0) | (CLONE_NEWNS if mounts else 0)
    if not flags:
        return
    unprivileged = os.geteuid() != 0
    _check(libc.unshare(flags | (CLONE_NEWUSER if unprivileged else 0)), "unshare")
    if unprivileged:
        _map_own_ids()
    if isolation.network:
        _loopback_up()
    if mounts:
        _remount(isolation)


def switch_user(uid: int, gid: int, groups: tuple[int, ...]) -> None:
    os.setgroups(list(groups))
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def probe(isolation: Isolation) -> str | None:
    """Tries the namespaces and mounts of `isolation` in a throw-away child: None if they work."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # no locks, no imports until _exit: safe after fork in a threaded process
        os.close(read_end)
        try:
            enter_namespaces(isolation)
        except BaseException as exc:
            os.write(write_end, str(exc).encode()[:500] or b"failed")
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        error = reader.read().decode(errors="replace")
    os.waitpid(pid, 0)
    return error or None
