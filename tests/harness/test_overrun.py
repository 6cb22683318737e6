"""A failed phase names the run's limit it ran into; memory in the cgroup is memory_limit."""

from __future__ import annotations

from cluster_manager.core.models import Limits, Verdict
from cluster_manager.harness.overrun import explain
from cluster_manager.sandbox.cgroups import Usage
from cluster_manager.sandbox.process import ProcessResult

LIMITS = Limits(memory_bytes=256 << 20, disk_bytes=512 << 20)


def _result(usage: Usage | None = None, stderr: str = "") -> ProcessResult:
    return ProcessResult(1, False, 1.0, "", stderr, {}, usage)


def test_an_oom_kill_in_the_cgroup_is_a_memory_limit():
    verdict, message = explain(
        "test", _result(Usage(oom_kills=1)), LIMITS, Verdict.RUNTIME_ERROR, "test: failed"
    )
    assert verdict is Verdict.MEMORY_LIMIT
    assert "memory limit of 256 MiB" in message


def test_enospc_and_the_process_cap_are_named_and_the_verdict_stays():
    verdict, message = explain(
        "test",
        _result(Usage(process_limit_hits=3), "OSError: [Errno 28] No space left on device"),
        LIMITS,
        Verdict.RUNTIME_ERROR,
        "test: test 0 failed",
    )
    assert verdict is Verdict.RUNTIME_ERROR
    assert "disk limit of 512 MiB" in message and "process limit" in message


def test_a_passing_phase_is_left_alone():
    verdict, message = explain("test", _result(Usage(oom_kills=1)), LIMITS, Verdict.PASSED, "ok")
    assert (verdict, message) == (Verdict.PASSED, "ok")


def test_without_a_cgroup_the_refused_memory_calls_and_the_smaller_disk_are_named():
    limits = Limits(memory_bytes=256 << 20, disk_bytes=4096 << 20)
    # A task's own harness may word a refused semget in its own way.
    semget = explain(
        "test",
        _result(None, "semget failed"),
        limits,
        Verdict.RUNTIME_ERROR,
        "x",
        refuses_uncounted=True,
    )[1]
    assert "semaphores and message queues" in semget
    stderr = (  # as the built-in harness words it, without the call's line
        "OSError: [Errno 12] Cannot allocate memory (submission.py, line 23)\n"
        '    fd = os.memfd_create("x")\nOSError: [Errno 12] Cannot allocate memory\n'
        "OSError: No space left on device"
    )
    verdict, message = explain(
        "test", _result(None, stderr), limits, Verdict.RUNTIME_ERROR, "x", refuses_uncounted=True
    )
    assert verdict is Verdict.RUNTIME_ERROR
    assert "disk limit of 256 MiB" in message  # the tmpfs mounts were cut to the memory cap
    assert "memfd_create and System V shared memory, semaphores and message queues" in message
    assert "(shmget, semget, msgget) are refused" in message
    _, grouped = explain("test", _result(Usage(), stderr), limits, Verdict.RUNTIME_ERROR, "x")
    assert "disk limit of 4096 MiB" in grouped and "memfd" not in grouped
