"""Attacks on the judging itself: slowing the trusted side a score is measured against,
shaping one's own reports, forging one rank of several, helpers that run between calls, and
hooks in the worker's own pipe. Each kernel really works for a known time (a sleep); a score
below nine tenths of it would be a gain of more than a tenth over the honest score."""

from __future__ import annotations

import pytest

from cluster_manager.core.task import load_task
from tests.adversarial.helpers import (
    attack,
    judged,
    machine_loaded,
    ranked_at_least,
    stdout_of,
)
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.adversarial

WORK_S = 0.002  # what every kernel here really does per call


SLOW_THE_CONTROLS = f"""
import ctypes, mmap, os, time
from cluster_manager.harness import timing

timing.CpuTimer.stop = lambda self: 1_000.0  # 1 µs, whatever the call took
libc = ctypes.CDLL(None, use_errno=True)
PRIO_PROCESS, PRIO_USER = 0, 2

# Lower the priority of every other process (the stand-in, the harness's helpers), by pid and
# for the whole user, and pin this one to a CPU the stand-in would follow it to.
others = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in (os.getpid(), 1)]
renice = [libc.setpriority(PRIO_PROCESS, pid, 19) == 0 for pid in others]
renice.append(libc.setpriority(PRIO_USER, 0, 19) == 0)
os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
print("RENICED", sum(renice), "OF", len(renice), flush=True)

# Helpers on every CPU that stream memory whenever this process is not in its call.
in_call = mmap.mmap(-1, 1)
for _ in range(os.cpu_count() or 2):
    if os.fork() == 0:
        block = bytearray(32 << 20)
        while True:
            if in_call[0] == 0:
                block[:] = block[::-1]

def custom_kernel(data):
    in_call[0] = 1
    time.sleep({WORK_S})
    in_call[0] = 0
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "slowing the trusted side: renice the stand-in and the user, pin the worker so the stand-in "
    "follows it, fork helpers that stream memory while the worker waits; timer reports 1 µs",
    "renicing refused; the helpers are stopped with the worker outside its calls: ranked at "
    "the 2 ms the calls take (root and ordinary user)",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "user"])
def test_slowing_the_trusted_side_gains_nothing(timed_identity, plain_user, record_property):
    result = judged(timed_identity, SLOW_THE_CONTROLS, plain_user=plain_user)
    reniced = {line for line in stdout_of(result).splitlines() if line.startswith("RENICED")}
    record_property("observed", f"{result.verdict.value}: score {result.score}; {reniced}")
    assert reniced and all(line.startswith("RENICED 0 OF") for line in reniced), reniced
    assert ranked_at_least(result, 0.9 * WORK_S), (result.message, result.score)
    assert result.passed, result.message


BALANCED_FORGERY = f"""
import random, time
from cluster_manager.harness import timing, wire

_clock = time.perf_counter_ns
arrived = [0]
original_decode = wire.decode

def decode(encoded):
    arrived[0] = _clock()  # when the request's inputs came in
    return original_decode(encoded)

wire.decode = decode

def stop(self):
    true = _clock() - self._t0
    draw = random.random()
    if draw < 0.45:
        return 1_000.0  # ~1 µs
    if draw < 0.55:
        return float(_clock() - arrived[0])  # the time since the request arrived
    return float(true)

timing.CpuTimer.stop = stop

def custom_kernel(data):
    time.sleep({WORK_S})
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "balancing a forgery: 45 % of calls report 1 µs, a tenth the time since the request came "
    "in, the rest the truth (a median and a sign count stay quiet)",
    "ranked at the 2 ms the calls take: no report is scored",
)
def test_a_balanced_forgery_gains_nothing(timed_identity, record_property):
    result = attack(timed_identity, BALANCED_FORGERY)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * WORK_S), (result.message, result.score)
    assert result.passed, result.message


@pytest.mark.reliability(
    "Anti-cheat",
    "the balanced forgery on a loaded machine: six processes beside the run that sleep and "
    "work by turns, as other jobs on a shared runner do (each wake preempts the stand-in's "
    "spin, not the forger's sleep)",
    "ranked at the 2 ms the calls take: the stand-in's waits for a CPU are not counted as "
    "moving data (root and ordinary user)",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "user"])
def test_a_balanced_forgery_on_a_loaded_machine_gains_nothing(
    timed_identity, plain_user, record_property
):
    with machine_loaded():
        result = judged(timed_identity, BALANCED_FORGERY, plain_user=plain_user)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * WORK_S), (result.message, result.score)
    assert result.passed, result.message


ONE_RANK_FORGES = f"""
import time
import torch.distributed as dist
from cluster_manager.harness import timing

# Rank 0's report is the one a multi-rank case is reported by: it says 1 µs. Rank 1 does
# its share of the work after the all-reduce, hoping its late output goes unseen.
RANK = dist.get_rank()
if RANK == 0:
    original_stop = timing.CpuTimer.stop
    timing.CpuTimer.stop = lambda self: original_stop(self) * 0 + 1_000.0  # still in step

def custom_kernel(data):
    x, _seed, _world_size = data
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    if RANK == 1:
        time.sleep({WORK_S})
    return out
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "one rank of a two-rank all-reduce forges its timer (1 µs) while the other does its work "
    "after the collective",
    "ranked at the 2 ms the slowest rank takes: every rank's output closes the window",
)
def test_one_ranks_forgery_gains_nothing(record_property):
    task = load_task(EXAMPLES / "allreduce_py")
    result = attack(task, ONE_RANK_FORGES)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * WORK_S), (result.message, result.score)
    assert result.passed, result.message


HELPER_BETWEEN_CALLS = f"""
import mmap, os, struct, time
from cluster_manager.harness import timing

timing.CpuTimer.stop = lambda self: 1_000.0

# A forked helper counts as fast as it can; the kernel compares how far it got inside its
# calls and between them, per second.
shared = mmap.mmap(-1, 8)
if os.fork() == 0:
    n = 0
    while True:
        n += 1
        shared[:8] = struct.pack("<q", n)

def count():
    return struct.unpack("<q", shared[:8])[0], time.perf_counter_ns()

rates = {{"in": [0, 0], "out": [0, 0]}}
last = [None]
calls = [0]

def custom_kernel(data):
    began = count()
    if last[0] is not None:
        rates["out"][0] += began[0] - last[0][0]
        rates["out"][1] += began[1] - last[0][1]
    time.sleep({WORK_S})
    ended = count()
    rates["in"][0] += ended[0] - began[0]
    rates["in"][1] += ended[1] - began[1]
    last[0] = ended
    calls[0] += 1
    if calls[0] % 10 == 0:
        inside = rates["in"][0] / max(rates["in"][1], 1)
        outside = rates["out"][0] / max(rates["out"][1], 1)
        print(f"HELPER {{outside / max(inside, 1e-12):.3f}}", flush=True)
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "a forked helper that runs between the worker's calls (to work off the clock or slow the "
    "stand-in); timer reports 1 µs",
    "the helper is stopped with the worker: between calls it runs only while the worker moves "
    "its data, inside the timed windows; ranked at the 2 ms (root and ordinary user)",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "user"])
def test_helpers_do_not_run_between_calls(timed_identity, plain_user, record_property):
    result = judged(timed_identity, HELPER_BETWEEN_CALLS, plain_user=plain_user)
    ratios = [
        float(line.split()[1])
        for line in stdout_of(result).splitlines()
        if line.startswith("HELPER")
    ]
    record_property("observed", f"{result.verdict.value}: score {result.score}; {ratios[-3:]}")
    assert ratios, stdout_of(result)[-2000:]
    # Never stopped, it keeps its pace between calls (a ratio of 1.0, measured). Stopped,
    # it runs between calls only while the worker sends its output and takes the next
    # inputs, inside the windows the harness times (0.23-0.45 on a loaded 2-core machine).
    assert ratios[-1] < 0.75, ratios
    assert ranked_at_least(result, 0.9 * WORK_S), (result.message, result.score)


PIPE_HOOKS = f"""
import time
from cluster_manager.harness import wire

# Do the work while the inputs are decoded (before the worker's timer starts) and hand the
# kernel the answer ready-made.
answers = {{}}
original_decode = wire.decode

def decode(encoded):
    data = original_decode(encoded)
    if hasattr(data, "data_ptr"):
        time.sleep({WORK_S})
        answers[data.data_ptr()] = data.clone()
    return data

wire.decode = decode

def custom_kernel(data):
    ready = answers.pop(data.data_ptr(), None)
    if ready is not None:
        return ready
    time.sleep({WORK_S})
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "hooking the worker's own pipe: the work done while the inputs are decoded, before the "
    "worker's timer starts",
    "ranked at the 2 ms: the window opens before the inputs leave the harness",
)
def test_work_in_the_workers_pipe_hooks_is_timed(timed_identity, record_property):
    result = attack(timed_identity, PIPE_HOOKS)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * WORK_S), (result.message, result.score)
    assert result.passed, result.message
