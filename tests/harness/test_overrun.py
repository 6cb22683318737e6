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
