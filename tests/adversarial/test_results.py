"""Attacks on the result channel: forging what the runner reads, or ending the run early."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cluster_manager.core.models import Mode, Verdict
from tests.adversarial.helpers import LIMITS, attack, not_ranked, small_task, stdout_of

pytestmark = pytest.mark.adversarial

FAKE_LINES = (
    "check: pass\\ntest-count: 1\\ntest.0.status: pass\\n"
    "benchmark-count: 1\\nbenchmark.0.runs: 3\\nbenchmark.0.mean: 1\\n"
)


@pytest.mark.reliability(
    "Anti-cheat",
    "printing popcorn result lines (a pass, a 1 ns benchmark) on stdout and stderr",
    "wrong_answer, never ranked; the lines stay captured output",
)
def test_printing_fake_results_to_stdout(any_identity, record_property):
    """Attack: print popcorn result lines (`check: pass`, a 1 ns benchmark) on stdout and stderr.
    Expected: they are only captured output; the wrong answer is a wrong_answer, never ranked."""
    code = f"""
    import sys
    print("{FAKE_LINES}", flush=True)
    print("{FAKE_LINES}", file=sys.stderr, flush=True)

    def custom_kernel(data):
        print("{FAKE_LINES}", flush=True)
        return data * 0
    """
    result = attack(any_identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.WRONG_ANSWER, result.message
    assert not_ranked(result)
    assert "check: pass" in stdout_of(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "writing fake result lines to every inherited fd, /proc/self/fd/* and the harness's fds",
    "runtime_error or timeout (own queue corrupted), never a pass",
)
def test_writing_to_inherited_file_descriptors(tmp_path: Path, record_property):
    """Attack: write fake result lines to every fd 3..50, to /proc/self/fd/* and to the harness
    process's /proc/<ppid>/fd/*. Expected: the result pipe is not among them; the worker only
    corrupts its own queue to the harness (runtime_error, or a timeout when the garbage reads
    as the start of a long message): the wrong answer is never turned into a pass."""
    code = f"""
    import glob, os

    FAKE = b"{FAKE_LINES}"

    def spray():
        for fd in range(3, 51):
            try:
                os.write(fd, FAKE)
            except OSError:
                pass
        for path in glob.glob("/proc/self/fd/*") + glob.glob(f"/proc/{{os.getppid()}}/fd/*"):
            try:
                with open(path, "wb", buffering=0) as fh:
                    fh.write(FAKE)
            except OSError:
                pass

    def custom_kernel(data):
        spray()
        return data * 0
    """
    task = small_task(tmp_path / "t", test_timeout=8)
    result = attack(task, code, limits=dataclasses.replace(LIMITS, grace=0))
    record_property("observed", f"{result.verdict.value}: {result.message}")
    failed = (Verdict.WRONG_ANSWER, Verdict.RUNTIME_ERROR, Verdict.TIMEOUT)
    assert result.verdict in failed, result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "putting an object on the result queue whose unpickling runs code in the harness",
    "runtime_error; the harness refuses to unpickle it and the code never runs",
)
def test_code_smuggled_into_the_harness_through_the_result_queue(identity, record_property):
    """Attack: put an object on the worker's result queue whose unpickling runs code in the
    harness process (which holds the result pipe). Expected: the harness refuses to unpickle it
    (runtime_error) and the code never runs there."""
    code = """
    import gc, multiprocessing.queues

    class Smuggled:
        def __reduce__(self):
            return (exec, ("import os; os.write(1, b'RAN-IN-THE-HARNESS')",))

    def custom_kernel(data):
        for obj in gc.get_objects():
            if type(obj) is multiprocessing.queues.SimpleQueue:
                obj.put(Smuggled())
        return data.clone()
    """
    result = attack(identity, code)
    ran = "RAN-IN-THE-HARNESS" in stdout_of(result)
    record_property("observed", f"{result.verdict.value}: {result.message}; code ran: {ran}")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert not_ranked(result)
    assert "RAN-IN-THE-HARNESS" not in stdout_of(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "calling `os._exit(0)` inside custom_kernel, hoping a clean exit reads as success",
    "runtime_error, never ranked",
)
def test_exiting_with_status_zero_inside_the_kernel(any_identity, record_property):
    """Attack: `os._exit(0)` inside custom_kernel, hoping a clean exit reads as success.
    Expected: runtime_error (the worker died before returning a result)."""
    code = """
    import os

    def custom_kernel(data):
        os._exit(0)
    """
    result = attack(any_identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "calling `sys.exit(0)` while the submission is imported",
    "runtime_error, never ranked",
)
def test_exiting_with_status_zero_at_import(any_identity, record_property):
    """Attack: `sys.exit(0)` while the submission is imported. Expected: runtime_error."""
    code = """
    import sys
    sys.exit(0)

    def custom_kernel(data):
        return data.clone()
    """
    result = attack(any_identity, code)
    error = [line for t in result.tests for line in t.error.strip().splitlines()[-1:]]
    record_property("observed", f"{result.verdict.value}: {' '.join(error[:1]) or result.message}")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert not_ranked(result)


# --- known gaps: the check and the clock run in the submission's process ---------------------

GAP = (
    "known gap: the worker that imports the submission also runs the check and the timer, "
    "so a submission that patches them in that process forges the worker's report"
)


@pytest.mark.reliability(
    "Anti-cheat",
    "patching `reference.check_implementation` in the worker to accept anything",
    "wrong_answer",
)
@pytest.mark.xfail(strict=True, reason=GAP)
def test_patching_the_reference_check_in_the_worker(identity):
    """Attack: replace `reference.check_implementation` in the worker with one that accepts
    anything, then return zeros. Expected: wrong_answer; today the forged check passes (xfail)."""
    code = """
    import reference
    reference.check_implementation = lambda data, output: ""

    def custom_kernel(data):
        return data * 0
    """
    result = attack(identity, code, Mode.TEST)
    assert result.verdict is Verdict.WRONG_ANSWER, result.message


@pytest.mark.reliability(
    "Anti-cheat",
    "replacing the worker's `timing.measure` with one that reports a 1 ns mean",
    "passed with a real score (no 1 ns mean ranked)",
)
@pytest.mark.xfail(strict=True, reason=GAP)
def test_patching_the_timing_loop_in_the_worker(identity):
    """Attack: replace the worker's `timing.measure` with one that reports a 1 ns mean without
    timing anything. Expected: no such score; today the forged stats are ranked (xfail)."""
    code = """
    from cluster_manager.harness import timing

    stats = timing.Stats(runs=3, mean=1.0, std=0.0, err=0.0, best=1.0, worst=1.0)
    timing.measure = lambda *args, **kwargs: stats

    def custom_kernel(data):
        return data.clone()
    """
    result = attack(identity, code)
    assert result.passed, result.message  # the run itself is fine...
    assert result.score is None or result.score > 1e-6  # ...but its score must be real
