"""The life of a runner's process trees: nothing started by a submission outlives its run.

A runner that is a child subreaper (`become_subreaper`) gets the orphans of its trees (a new
session, a double fork) and kills them with the tree. A tree that runs as a user of its own is
also killed with one `kill(-1)` as that user, which no fork bomb can outrun. A runner that is
cancelled (SIGTERM) kills every tree it runs before it exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster_manager.sandbox.namespaces import Isolation, libc

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_subreaper = False
# Process groups of the trees running now, with their isolation, so a termination request
# can kill them.
running: dict[int, Isolation] = {}
_on_termination: list[Callable[[], None]] = []


def become_subreaper() -> bool:
    """Orphans of our descendants get re-parented to us instead of init (Linux >= 3.4)."""
    global _subreaper
    try:
        _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except AttributeError:
        _subreaper = False
    return _subreaper


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies: a killed runner takes its tree along."""
    with contextlib.suppress(AttributeError):
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def make_undumpable() -> None:
    """Keeps processes of the same user out of /proc/<pid>/environ, fd and mem (and ptrace)."""
    with contextlib.suppress(AttributeError):
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def kill_everything_on_sigterm() -> None:
    """A cancelled runner (SIGTERM) kills every tree it runs, then exits."""

    def handler(signum: int, _frame: object) -> None:
        for pgid, isolation in list(running.items()):
            kill_user_of(isolation)
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


def kill_user_of(isolation: Isolation) -> None:
    if isolation.private_user and isolation.user is not None:
        with contextlib.suppress(OSError):
            kill_user(isolation.user[0])


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
