"""The worker's own syscall filter, installed in a forked child of this process: what it may
still do to itself, and what it may no longer do to the processes that judge it."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import threading

import pytest

from cluster_manager.harness import guard
from cluster_manager.sandbox import seccomp

PRIO_PROCESS, PRIO_PGRP, PRIO_USER = 0, 1, 2
IOPRIO_SET = seccomp.ABIS[platform.machine()].numbers["ioprio_set"]
IOPRIO_WHO_PROCESS, IOPRIO_BEST_EFFORT_4 = 1, (2 << 13) | 4
_libc = ctypes.CDLL(None, use_errno=True)


def _errno_of(call: int) -> int:
    return 0 if call == 0 else ctypes.get_errno()


def _in_guarded_child(judge: int, judge_thread: int) -> dict[str, int]:
    """Forks a child in a group of its own (as the zygote makes workers), filters it with
    `judge` as the process to protect, and returns the errno of each attempt (0: allowed).
    `judge_thread`: a thread of `judge` (not its first), which the filter was not told of."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        results: dict[str, int] = {}
        try:
            os.close(read)
            os.setpgid(0, 0)
            results["filter"] = (
                0 if guard.protect([judge], [os.getpgid(judge)]) == "filtered" else 1
            )
            own = os.getpriority(os.PRIO_PROCESS, 0)
            cpus = os.sched_getaffinity(0)
            results["own priority"] = _errno_of(_libc.setpriority(PRIO_PROCESS, 0, own))
            results["own I/O priority"] = _errno_of(
                _libc.syscall(IOPRIO_SET, IOPRIO_WHO_PROCESS, 0, IOPRIO_BEST_EFFORT_4)
            )
            results["own group's priority"] = _errno_of(_libc.setpriority(PRIO_PGRP, 0, own))
            results["judge's priority"] = _errno_of(_libc.setpriority(PRIO_PROCESS, judge, 19))
            results["judge's I/O priority"] = _errno_of(
                _libc.syscall(IOPRIO_SET, IOPRIO_WHO_PROCESS, judge, IOPRIO_BEST_EFFORT_4)
            )
            results["user's priority"] = _errno_of(_libc.setpriority(PRIO_USER, 0, 19))
            results["judge's group"] = _errno_of(_libc.kill(-os.getpgid(judge), 0))
            results["judge's affinity"] = _errno_of(
                _libc.sched_setaffinity(judge, 0, None)  # refused before the mask is read
            )
            # A thread of a judge has an id of its own, like the judge's helper here.
            results["judge's thread's affinity"] = _errno_of(
                _libc.sched_setaffinity(judge_thread, 0, None)
            )
            results["judge's thread's class"] = _errno_of(
                _libc.sched_setscheduler(judge_thread, 0, None)
            )
            results["setsid"] = _errno_of(_libc.setsid())
            results["setpgid"] = _errno_of(_libc.setpgid(0, 0))
            results["own affinity"] = _errno_of(0 if os.sched_setaffinity(0, cpus) is None else 1)
            results["own affinity by pid"] = _errno_of(
                0 if os.sched_setaffinity(os.getpid(), cpus) is None else 1
            )
        finally:
            os.write(write, json.dumps(results).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        results = json.loads(pipe.read() or "{}")
    os.waitpid(pid, 0)
    return results


@pytest.mark.reliability(
    "Anti-cheat",
    "from the submission's process: lowering the priority or I/O priority of the harness or "
    "the stand-in (by pid, by group, by user), moving or idling one of their threads by its "
    "id, signalling their group, leaving its own process group",
    "EPERM for each; its own priority, I/O priority and CPU placement stay its own to set",
)
def test_a_worker_cannot_slow_move_or_escape_the_processes_that_judge_it(record_property):
    priority = os.getpriority(os.PRIO_PROCESS, 0)
    started, done = threading.Event(), threading.Event()
    ids: list[int] = []

    def helper() -> None:  # a thread of the judge's pool, waiting for work
        ids.append(threading.get_native_id())
        started.set()
        done.wait()

    thread = threading.Thread(target=helper)
    thread.start()
    started.wait()
    try:
        results = _in_guarded_child(os.getpid(), ids[0])
    finally:
        done.set()
        thread.join()
    record_property("observed", json.dumps(results))
    assert results["filter"] == 0, results
    allowed = ["own priority", "own I/O priority", "own affinity", "own affinity by pid"]
    assert {name: results[name] for name in allowed} == dict.fromkeys(allowed, 0), results
    refused = ["judge's priority", "judge's I/O priority", "user's priority", "judge's group"]
    refused += ["own group's priority", "judge's affinity", "judge's thread's affinity"]
    refused += ["judge's thread's class", "setsid", "setpgid"]
    assert {name: results[name] for name in refused} == dict.fromkeys(refused, errno.EPERM)
    assert os.getpriority(os.PRIO_PROCESS, 0) == priority  # the judge's, unchanged
