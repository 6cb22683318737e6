"""The worker's own syscall filter: what keeps a submission's process away from the processes
that judge it.

The harness process and its stand-in run as the same user as the submission; the sandbox
(bubblewrap's filter) already refuses tracing them, but not signals or scheduling, which the
kernel allows between processes of one user. Before a worker imports the submission it
filters itself (and so every thread and child it starts): no signal aimed at those processes,
their process groups or every process; no priority, I/O priority, scheduling class, CPU
placement, limit or page placement but its own (pid 0, or the worker's own pid): each thread
of the harness and the stand-in has an id of its own, which no list made now could hold (their
thread pools start later), and pinning or idling one of them slows what it does; no leaving
its process group (which the harness stops between calls: `workers.ForkedPeer.freeze`); no
tracing, reading or taking descriptors of any other process, also where the sandbox is
partial. A refused call fails with EPERM. (multiprocessing's resource tracker, another such
process, is never started: `workers._no_resource_tracker`.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from cluster_manager.sandbox import seccomp
from cluster_manager.sandbox.seccomp import IOPRIO_WHO_PROCESS, PRIO_PROCESS, Rule

_SIGNAL = "signals the processes that time and check the submission (SIGSTOP holds them up)"
_SCHEDULE = "slows or moves the processes that time the submission"
_OTHER = "reads or controls another process"
_LEAVE = "a process outside the worker's group would run while the harness measures"
EVERY_PROCESS = -1  # kill(-1): every process the user may signal


def _low32(value: int) -> int:
    """As the filter sees a pid argument: its low 32 bits (negative ones in two's complement)."""
    return value & 0xFFFFFFFF


def rules(protected: Iterable[int], groups: Iterable[int] = ()) -> tuple[Rule, ...]:
    """The rules for a worker whose judges are the processes `protected`, in the process
    `groups` (the harness's; the stand-in leads its own)."""
    pids = sorted({_low32(pid) for pid in protected if pid > 0})
    leaders = {pid for pid in protected if pid > 0} | {g for g in groups if g > 0}
    # kill(-pgid) signals a whole group; kill(0) and kill(-own) the worker's own, which the
    # harness stops and lets run (a worker that did so itself would only stall its calls).
    own = os.getpgid(0)
    targets = (*pids, 0, _low32(EVERY_PROCESS), *sorted(_low32(-g) for g in {*leaders, own}))
    # Scheduling, placement and limits: of itself (0), or of the worker by its pid (its first
    # thread: pthread_setaffinity_np names a thread by its id). Any other id may be a thread
    # of the harness or the stand-in: sched_setaffinity and sched_setscheduler act on the one
    # thread named, prlimit64 and the page calls on its whole process.
    itself = (0, _low32(os.getpid()))
    return (
        Rule("kill", _SIGNAL, equals=targets),
        Rule("tkill", "a thread id of a judging process would stop all of it"),
        Rule("tgkill", _SIGNAL, equals=targets),
        Rule("rt_sigqueueinfo", _SIGNAL, equals=targets),
        Rule("rt_tgsigqueueinfo", _SIGNAL, equals=targets),
        Rule("pidfd_send_signal", "a pidfd (or /proc/PID) may name any process"),
        Rule("sched_setaffinity", _SCHEDULE, unless=itself),
        Rule("sched_setscheduler", _SCHEDULE, unless=itself),
        Rule("sched_setparam", _SCHEDULE, unless=itself),
        Rule("sched_setattr", _SCHEDULE, unless=itself),
        Rule("prlimit64", _SCHEDULE, unless=itself),
        Rule("migrate_pages", _SCHEDULE, unless=itself),
        Rule("move_pages", _SCHEDULE, unless=itself),
        # Its own priority and I/O priority only (who = 0): lowering the stand-in's slowed the
        # replays a score is measured against; a group or the user would reach it too.
        Rule("setpriority", _SCHEDULE, only=((0, (PRIO_PROCESS,)), (1, (0,)))),
        Rule("ioprio_set", _SCHEDULE, only=((0, (IOPRIO_WHO_PROCESS,)), (1, (0,)))),
        Rule("setpgid", _LEAVE),
        Rule("setsid", _LEAVE),
        Rule("ptrace", _OTHER),
        Rule("process_vm_readv", _OTHER),
        Rule("process_vm_writev", _OTHER),
        Rule("pidfd_open", _OTHER),
        Rule("pidfd_getfd", _OTHER),
        Rule("kcmp", _OTHER),
    )


def protect(protected: Iterable[int], groups: Iterable[int] = ()) -> str:
    """Filters this process as `rules` says; what it got, for the harness to report."""
    code = seccomp.program(rules=rules(protected, groups))
    if code is None:
        return "no filter on this architecture"
    try:
        seccomp.install(code)
    except OSError as exc:
        return f"filter refused: {exc}"
    return "filtered"
