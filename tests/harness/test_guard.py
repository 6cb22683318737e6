"""The worker's own syscall filter, installed in a forked child of this process: what it may
still do to itself, and what it may no longer do to the processes that judge it."""

from __future__ import annotations

import ctypes
import errno
import json
import os

import pytest

from cluster_manager.harness import guard

PRIO_PROCESS, PRIO_PGRP, PRIO_USER = 0, 1, 2
_libc = ctypes.CDLL(None, use_errno=True)


def _errno_of(call: int) -> int:
    return 0 if call == 0 else ctypes.get_errno()


def _in_guarded_child(judge: int) -> dict[str, int]:
    """Forks a child in a group of its own (as the zygote makes workers), filters it with
    `judge` as the process to protect, and returns the errno of each attempt (0: allowed)."""
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
            results["own priority"] = _errno_of(_libc.setpriority(PRIO_PROCESS, 0, own))
            results["own group's priority"] = _errno_of(_libc.setpriority(PRIO_PGRP, 0, own))
            results["judge's priority"] = _errno_of(_libc.setpriority(PRIO_PROCESS, judge, 19))
            results["user's priority"] = _errno_of(_libc.setpriority(PRIO_USER, 0, 19))
            results["judge's group"] = _errno_of(_libc.kill(-os.getpgid(judge), 0))
            results["judge's affinity"] = _errno_of(
                _libc.sched_setaffinity(judge, 0, None)  # refused before the mask is read
            )
            results["setsid"] = _errno_of(_libc.setsid())
            results["setpgid"] = _errno_of(_libc.setpgid(0, 0))
            results["own affinity"] = _errno_of(
                0 if os.sched_setaffinity(0, os.sched_getaffinity(0)) is None else 1
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
    "from the submission's process: lowering the priority of the harness or the stand-in "
    "(setpriority by pid, by user), signalling their group, leaving its own process group",
    "EPERM for each; its own priority and CPU placement stay its own to set",
)
def test_a_worker_cannot_slow_move_or_escape_the_processes_that_judge_it(record_property):
    priority = os.getpriority(os.PRIO_PROCESS, 0)
    results = _in_guarded_child(os.getpid())
    record_property("observed", json.dumps(results))
    assert results["filter"] == 0, results
    assert results["own priority"] == 0 and results["own group's priority"] == 0, results
    assert results["own affinity"] == 0, results
    refused = ["judge's priority", "user's priority", "judge's group", "judge's affinity"]
    refused += ["setsid", "setpgid"]
    assert {name: results[name] for name in refused} == dict.fromkeys(refused, errno.EPERM)
    assert os.getpriority(os.PRIO_PROCESS, 0) == priority  # the judge's, unchanged
