"""Attacks on correctness and timing: stale, aliased, lazy or late answers, patched clocks."""

from __future__ import annotations

import pytest

from tests.adversarial.helpers import attack, failed_in, not_ranked

pytestmark = pytest.mark.adversarial


@pytest.mark.reliability(
    "Anti-cheat",
    "caching each output by input shape and returning it again for every later call",
    "wrong_answer in the ranked phase (timed iterations re-checked), never ranked",
)
def test_caching_outputs_across_calls(any_identity, record_property):
    """Attack: remember each output and return it again for any input of the same shape (the
    strongest of id-, data_ptr- and shape-keyed caches: it always hits). Expected: the fresh
    inputs and re-check of every timed iteration catch the stale answer: wrong_answer."""
    code = """
    cache = {}

    def custom_kernel(data):
        key = (tuple(data.shape), data.dtype)
        if key not in cache:
            cache[key] = data.clone()
        return cache[key]
    """
    result = attack(any_identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "leaderboard"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "returning a view of the input, hoping the check compares the output with itself",
    "wrong_answer in the test phase, never ranked",
)
def test_returning_a_view_of_the_input(negate, record_property):
    """Attack: return (a view of) the argument itself on a task whose output must differ from
    its input, hoping the check compares the output with itself. Expected: the kernel's argument
    is a clone, the check's inputs are not: wrong_answer."""
    code = """
    def custom_kernel(data):
        return data.view_as(data)
    """
    result = attack(negate, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "test"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "zeroing the input tensor and returning it, so a check reading the input would pass",
    "wrong_answer in the test phase (the check keeps its own copy), never ranked",
)
def test_mutating_the_inputs_so_the_check_passes(negate, record_property):
    """Attack: zero the input and return it (-0 == 0: a check reading the mutated input would
    pass). Expected: the check uses its own pristine copy: wrong_answer."""
    code = """
    def custom_kernel(data):
        data.zero_()
        return data
    """
    result = attack(negate, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "test"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "returning an empty tensor and filling it from a background thread 0.2 s later",
    "wrong_answer in the test phase, never ranked",
)
def test_output_filled_by_a_thread_after_returning(identity, record_property):
    """Attack: return an empty tensor at once and fill it from a background thread a moment
    later, so the work happens after the timer stopped. Expected: the check runs right after the
    call and sees the unfilled tensor: wrong_answer."""
    code = """
    import threading, time, torch

    def custom_kernel(data):
        out = torch.zeros_like(data)

        def fill():
            time.sleep(1.0)  # long after the check, even on a busy machine
            out.copy_(data)

        threading.Thread(target=fill, daemon=True).start()
        return out
    """
    result = attack(identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "test"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "returning shared memory that a forked child fills after the call returned",
    "wrong_answer in the test phase, never ranked",
)
def test_output_filled_by_a_background_process(identity, record_property):
    """Attack: return a tensor over shared memory that a forked child fills after the call
    returned. Expected: wrong_answer, and the child does not outlive the run."""
    code = """
    import mmap, os, time, torch

    def custom_kernel(data):
        buffer = mmap.mmap(-1, data.numel() * data.element_size())
        out = torch.frombuffer(buffer, dtype=data.dtype).view(data.shape)
        if os.fork() == 0:
            time.sleep(1.0)  # long after the check, even on a busy machine
            out.copy_(data)
            os._exit(0)
        return out
    """
    result = attack(identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "test"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "returning a lazy tensor subclass that computes the answer only when the check reads it",
    "wrong_answer (outputs must be plain tensors), never ranked",
)
def test_output_that_computes_itself_when_read(identity, record_property):
    """Attack: return a tensor subclass that computes the real answer only when the check
    touches it (after the timer). Expected: outputs must be plain tensors: wrong_answer."""
    code = """
    import torch

    class Lazy(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            real = [a.source.clone() if isinstance(a, Lazy) else a for a in args]
            return func(*real, **(kwargs or {}))

    def custom_kernel(data):
        out = torch.empty(0).as_subclass(Lazy)
        out.source = data
        return out
    """
    result = attack(identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "test"), result.message
    assert "plain tensors" in result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "answering honestly when checked, then finishing the work in a thread in timed iterations",
    "wrong_answer in the ranked phase (every timed iteration re-checked), never ranked",
)
def test_work_moved_off_the_clock_only_in_timed_iterations(identity, record_property):
    """Attack: answer honestly while tested and for the first checked calls, then (in the timed
    iterations) return at once and let a background thread finish the work. Expected: every
    timed iteration is re-checked on fresh inputs: wrong_answer in the ranked phase."""
    code = """
    import time, torch
    from concurrent.futures import ThreadPoolExecutor

    calls = 0
    helper = ThreadPoolExecutor(max_workers=1)

    def finish(out, data):
        time.sleep(0.2)  # the work, done after the call returned
        out.copy_(data)

    def custom_kernel(data):
        global calls
        calls += 1
        if calls <= 4:
            return data.clone()
        out = torch.zeros_like(data)
        helper.submit(finish, out, data)
        return out
    """
    result = attack(identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "leaderboard"), result.message
    assert not_ranked(result)


HONEST = """
import time

def custom_kernel(data):
    time.sleep(0.002)
    return data.clone()
"""

PATCHED = """
import time
import torch
from cluster_manager.harness import timing

time.perf_counter_ns = lambda: 0
time.perf_counter = lambda: 0.0
time.monotonic_ns = lambda: 0
time.process_time_ns = lambda: 0
torch.cuda.synchronize = lambda *args, **kwargs: None
timing._perf_counter_ns = lambda: 0
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "stubbing time.perf_counter(_ns), monotonic_ns, cuda.synchronize and the timing clock",
    "passed with a real mean: at least 1.5 ms for a 2 ms kernel, like its honest twin",
)
def test_patching_the_clocks(identity, record_property):
    """Attack: replace time.perf_counter(_ns), monotonic_ns, process_time_ns,
    torch.cuda.synchronize and the timing module's clock with stubs, then run a 2 ms kernel.
    Expected: the harness's clock was bound before the submission loaded: the mean is a real
    one (at least 1.5 ms), like an honest twin's."""
    honest = attack(identity, HONEST)
    patched = attack(identity, PATCHED + HONEST)
    record_property("observed", f"{patched.verdict.value}: {patched.message}")
    assert honest.passed and patched.passed, (honest.message, patched.message)
    honest_mean = honest.benchmarks[0].mean
    patched_mean = patched.benchmarks[0].mean
    record_property(
        "observed",
        f"{patched.verdict.value}: mean {patched_mean / 1e6:.2f} ms patched vs "
        f"{honest_mean / 1e6:.2f} ms honest",
    )
    # Only the floor is firm: load can stretch either twin's sleep, never shrink it.
    assert patched_mean >= 1.5e6, (patched_mean, honest_mean)
    assert patched.score is not None and patched.score >= 1.5e-3
