"""Attacks on the result channel: forging what the runner reads, or ending the run early."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cluster_manager.core.models import Verdict
from tests.adversarial.helpers import (
    LIMITS,
    attack,
    failed_in,
    not_ranked,
    ranked_at_least,
    small_task,
    stdout_of,
)

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
    "sending an object on the worker's connection whose unpickling runs code in the harness",
    "runtime_error; the harness refuses to unpickle it and the code never runs",
)
def test_code_smuggled_into_the_harness_through_the_connection(identity, record_property):
    """Attack: put an object on the worker's result queue whose unpickling runs code in the
    harness process (which holds the result pipe). Expected: the harness refuses to unpickle it
    (runtime_error) and the code never runs there."""
    code = """
    import gc
    from multiprocessing.connection import Connection

    class Smuggled:
        def __reduce__(self):
            return (exec, ("import os; os.write(1, b'RAN-IN-THE-HARNESS')",))

    def custom_kernel(data):
        for obj in gc.get_objects():
            if type(obj) is Connection:
                obj.send(Smuggled())
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


# --- attacks on the harness inside the worker: the check and the clock live elsewhere ---------

SLOW_KERNEL = """
    import time

    def custom_kernel(data):
        time.sleep(0.05)
        return data.clone()
    """


@pytest.mark.reliability(
    "Anti-cheat",
    "patching `reference.check_implementation` in the worker to accept anything, returning zeros",
    "wrong_answer (the check runs in the harness process, on inputs it generated)",
)
def test_patching_the_reference_check_in_the_worker(identity, record_property):
    """Attack: replace `reference.check_implementation` in the worker with one that accepts
    anything, then return zeros. Expected: the check that counts runs in the harness process,
    which never imports the submission: wrong_answer."""
    code = """
    import reference
    reference.check_implementation = lambda data, output: ""

    def custom_kernel(data):
        return data * 0
    """
    result = attack(identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "test"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "patching the worker's timer class to report 1 ns for every call of a 50 ms kernel",
    "ranked at the 50 ms the harness's clock sees (the report is never scored)",
)
def test_patching_the_timer_in_the_worker(slow_identity, record_property):
    """Attack: replace the stop of the worker's timer class so every call of a 50 ms kernel
    reports 1 ns. Expected: the score is the harness's clock, which sees the 50 ms."""
    code = (
        """
    from cluster_manager.harness import timing

    timing.CpuTimer.stop = lambda self: 1.0
    """
        + SLOW_KERNEL
    )
    result = attack(slow_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * 0.05), (result.message, result.score)


def take_over_the_timed_step(
    before_reply_s: float, after_reply_s: float, *, report_honestly: bool = False
) -> str:
    """A submission that replaces the worker's timed step (found through `gc`: the worker's
    table of steps): it sleeps `before_reply_s` and reports 1 ns (or, honestly, that sleep),
    and only then works `after_reply_s` more and computes the output it sends after the
    duration."""
    return f"""
    import gc
    import time
    from cluster_manager.harness import wire

    def take_over(steps):
        worker = steps["run"].__self__

        def run(inputs=None, with_output=False, *stand_in_only):
            if inputs is not None:
                worker._argument = wire.decode(inputs)
            began = time.perf_counter_ns()
            time.sleep({before_reply_s})
            yield float(time.perf_counter_ns() - began) if {report_honestly} else 1.0
            time.sleep({after_reply_s})
            if with_output:
                yield {{"ok": True, "output": worker._argument.clone()}}

        steps["run"] = run

    for obj in gc.get_objects():
        owner = getattr(obj.get("run"), "__self__", None) if type(obj) is dict else None
        if type(owner).__name__ == "Worker":
            take_over(obj)

    def custom_kernel(data):
        return data.clone()
    """


@pytest.mark.reliability(
    "Anti-cheat",
    "replacing the worker's timed step: reply 1 ns, run the 50 ms kernel before sending the output",
    "runtime_error: a timed call's duration and output come back as one reply",
)
def test_replying_before_the_kernel_ran(slow_identity, record_property):
    """Attack: replace the worker's timed step so it reports 1 ns as soon as it is asked and
    does the 50 ms of work before sending the output. Expected: refused, since a timed
    call's duration and output travel as one reply (`worker.Timed`); were a duration alone
    taken, the window would still close on the output, 50 ms later."""
    result = attack(slow_identity, take_over_the_timed_step(0.0, 0.05))
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * 0.05), (result.message, result.score)


@pytest.mark.reliability(
    "Anti-cheat",
    "sending forged 1 ns replies ahead of the harness's requests on the worker's connection",
    "runtime_error (replies must echo their request's random token), never ranked",
)
def test_replies_sent_ahead_of_the_requests(identity, record_property):
    """Attack: from inside the kernel, queue forged 1 ns duration replies on the worker's
    connection so the harness reads them the moment it asks. Expected: every reply must echo
    the random token of its request: runtime_error, no score."""
    code = """
    import gc, struct
    from multiprocessing.connection import Connection

    def custom_kernel(data):
        for obj in gc.get_objects():
            if type(obj) is Connection:
                for guess in range(3):
                    obj.send_bytes(struct.pack("<dQ", 1.0, guess))
        return data.clone()
    """
    result = attack(identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message
    assert "out of turn" in result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "patching the worker's timer class to report three quarters of every 50 ms call",
    "ranked at the 50 ms the harness's clock sees",
)
def test_shaving_a_quarter_off_every_call(slow_identity, record_property):
    """Attack: scale every duration the worker's timer reports by 0.75 on a 50 ms kernel,
    hoping to stay within what load explains. Expected: reports are never scored: ranked at
    the 50 ms."""
    code = (
        """
    from cluster_manager.harness import timing

    original_stop = timing.CpuTimer.stop
    timing.CpuTimer.stop = lambda self: 0.75 * original_stop(self)
    """
        + SLOW_KERNEL
    )
    result = attack(slow_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * 0.05), (result.message, result.score)


@pytest.mark.reliability(
    "Anti-cheat",
    "replacing the worker's timed step: report 2 ms of work honestly, work 1 ms more after it",
    "runtime_error: a timed call's duration and output come back as one reply",
)
def test_moving_a_third_of_the_work_after_the_reply(timed_identity, record_property):
    """Attack: work 2 ms and report exactly that, then work 1 ms more before sending the
    output, hoping load explains it. Expected: refused, since a timed call's duration and
    output travel as one reply; were a duration alone taken, the window would still close
    on the output: ranked at the 3 ms, however loaded the machine."""
    code = take_over_the_timed_step(0.002, 0.001, report_honestly=True)
    result = attack(timed_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * 0.003), (result.message, result.score)
