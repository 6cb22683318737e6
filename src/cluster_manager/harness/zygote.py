"""Where the workers and the stand-in come from: a fork of the harness process taken right
after it imported torch, before it read the seed, opened the result pipe or made any input.
It forks each of them on request in milliseconds, where a spawned interpreter imports torch
anew: seconds of CPU each, three times in every timed phase.

The zygote keeps only stdin, stdout, stderr and its end of the channel to the harness; each
process it forks keeps only its own pipe to the harness. No secret ever reaches it: the
harness takes the seed after the fork, from a pipe (`evaluate.py` moves a seed given in the
environment there and starts afresh, since every fork would carry the environment's
strings). It is undumpable, dies with the harness, and its children die with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import NoReturn

from cluster_manager.sandbox.lifecycle import die_with_parent, make_undumpable
from cluster_manager.sandbox.namespaces import libc

# For the workers and the stand-in: buffers up to 32 MiB come from a heap that is never given
# back, not from fresh mappings whose pages fault in anew on every call. glibc's default moves
# that threshold with each process's history, so two processes moving the same data took
# hundreds of µs apart for a megabyte. Set in the zygote, so every fork starts with it; the
# environment carries it to whatever those processes start.
_MMAP_THRESHOLD, _TRIM_THRESHOLD = 32 << 20, 1 << 30
ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(_MMAP_THRESHOLD),
    "MALLOC_TRIM_THRESHOLD_": str(_TRIM_THRESHOLD),
}
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)

_PID = struct.Struct("<q")
_MAX_ROLE = 64
_EXIT_WAIT_S = 1.0


def _roles() -> dict[str, Callable[[Connection], None]]:
    from cluster_manager.harness import worker

    return {"worker": worker.serve, "stand_in": worker.serve_stand_in}


class ForkedProcess:
    """A process the zygote forked. Not our child, so it is killed by pid; the zygote reaps it
    only on the next request, so the pid cannot name another process before then."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


class Zygote:
    """The harness's end: forks the zygote now, then asks it for processes."""

    def __init__(self) -> None:
        import torch  # noqa: F401 - the point: every fork starts with torch imported

        _roles()  # and with the worker's own modules
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(theirs)
        theirs.close()
        self.pid = pid
        self._channel = ours

    def fork(self, role: str, connection: Connection) -> ForkedProcess:
        """A new process running `role`'s loop on `connection` (the caller closes its copy)."""
        try:
            socket.send_fds(self._channel, [role.encode()], [connection.fileno()])
            reply = self._channel.recv(_PID.size)
        except OSError:
            reply = b""
        if len(reply) != _PID.size:
            raise OSError("the process that starts the workers is gone")
        (pid,) = _PID.unpack(reply)
        return ForkedProcess(pid)

    def close(self) -> None:
        """Hangs up, which ends the zygote; killed if it has not ended within a second."""
        self._channel.close()
        deadline = time.monotonic() + _EXIT_WAIT_S
        with contextlib.suppress(ChildProcessError):
            while not os.waitpid(self.pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    return
                time.sleep(0.001)


def _serve(channel: socket.socket) -> NoReturn:
    """The zygote's loop: one role and one pipe in, the forked process's pid out."""
    code = 1
    try:
        die_with_parent()
        make_undumpable()
        _keep_only(channel.fileno())
        _tune_allocator()
        roles = _roles()
        while True:
            message, fds, _, _ = socket.recv_fds(channel, _MAX_ROLE, 1)
            if not message or len(fds) != 1:
                break  # the harness hung up
            _reap()  # before answering: what ended before a request is gone once it is answered
            pid = _fork(roles[message.decode()], fds[0], channel)
            os.close(fds[0])
            channel.send(_PID.pack(pid))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        _exit(code)


def _fork(target: Callable[[Connection], None], fd: int, channel: socket.socket) -> int:
    pid = os.fork()
    if pid:
        # Here too, so the group exists before the harness hears of the pid (the child may
        # not have run yet); if the child got there first, this fails harmlessly.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        return pid
    code = 1
    try:
        channel.close()
        # A group of its own, which the harness stops between timed calls (a worker's
        # children stay in it: `guard.py` refuses leaving it).
        os.setpgid(0, 0)
        target(Connection(fd))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        _exit(code)


def _keep_only(fd: int) -> None:
    """Closes every descriptor the harness had open but stdin, stdout, stderr and `fd`."""
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))


def _tune_allocator() -> None:
    os.environ.update(ALLOCATOR_ENV)
    with contextlib.suppress(AttributeError):  # not glibc
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def _reap() -> None:
    """Collects the forked processes that have ended (they were killed or hung up)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _exit(code: int) -> NoReturn:
    """Leaves without running the harness's exit handlers or flushing its buffers twice."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
