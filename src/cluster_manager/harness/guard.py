"""The worker's own syscall filter: what keeps a submission's process away from the processes
that judge it.

The harness process and its stand-in run as the same user as the submission; the sandbox
(bubblewrap's filter) already refuses tracing them, but not signals or scheduling, which the
kernel allows between processes of one user. Before a worker imports the submission it
filters itself (and so every thread and child it starts): no signal, priority, affinity or
limit change aimed at those processes, their process group or every process; no tracing,
reading or taking descriptors of any other process, also where the sandbox is partial. A
refused call fails with EPERM. (multiprocessing's resource tracker, another such process, is
never started: `workers._no_resource_tracker`.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from cluster_manager.sandbox import seccomp
from cluster_manager.sandbox.seccomp import Rule

_SIGNAL = "signals the processes that time and check the submission (SIGSTOP holds them up)"
_SCHEDULE = "slows or moves the processes that time the submission"
_OTHER = "reads or controls another process"
EVERY_PROCESS = -1  # kill(-1): every process the user may signal


def _low32(value: int) -> int:
    """As the filter sees a pid argument: its low 32 bits (negative ones in two's complement)."""
    return value & 0xFFFFFFFF


def rules(protected: Iterable[int]) -> tuple[Rule, ...]:
    """The rules for a worker whose judges are the processes `protected`."""
    pids = sorted({_low32(pid) for pid in protected if pid > 0})
    group = _low32(-os.getpgid(0))
    # kill(0) and kill(-pgid) reach the worker's own group, which holds the harness.
    targets = (*pids, 0, _low32(EVERY_PROCESS), group)
    return (
        Rule("kill", _SIGNAL, equals=targets),
        Rule("tkill", "a thread id of a judging process would stop all of it"),
        Rule("tgkill", _SIGNAL, equals=targets),
        Rule("rt_sigqueueinfo", _SIGNAL, equals=targets),
        Rule("rt_tgsigqueueinfo", _SIGNAL, equals=targets),
        Rule("pidfd_send_signal", "a pidfd (or /proc/PID) may name any process"),
        Rule("sched_setaffinity", _SCHEDULE, equals=tuple(pids)),
        Rule("sched_setscheduler", _SCHEDULE, equals=tuple(pids)),
        Rule("sched_setparam", _SCHEDULE, equals=tuple(pids)),
        Rule("sched_setattr", _SCHEDULE, equals=tuple(pids)),
        Rule("prlimit64", _SCHEDULE, equals=tuple(pids)),
        Rule("migrate_pages", _SCHEDULE, equals=tuple(pids)),
        Rule("move_pages", _SCHEDULE, equals=tuple(pids)),
        # PRIO_PGRP and PRIO_USER reach the harness too; PRIO_PROCESS (0) may name it, but
        # an ordinary user can only lower a priority, which slows both sides of a pairing.
        Rule("setpriority", _SCHEDULE, unless=(0,)),
        Rule("ptrace", _OTHER),
        Rule("process_vm_readv", _OTHER),
        Rule("process_vm_writev", _OTHER),
        Rule("pidfd_open", _OTHER),
        Rule("pidfd_getfd", _OTHER),
        Rule("kcmp", _OTHER),
    )


def protect(protected: Iterable[int]) -> str:
    """Filters this process as `rules` says; what it got, for the harness to report."""
    code = seccomp.program(rules=rules(protected))
    if code is None:
        return "no filter on this architecture"
    try:
        seccomp.install(code)
    except OSError as exc:
        return f"filter refused: {exc}"
    return "filtered"
