"""Attacks on the judging itself: slowing the trusted side a score is measured against,
shaping one's own reports, forging one rank of several, helpers that run between calls, and
hooks in the worker's own pipe. Each kernel really works for a known time (a sleep); a score
below nine tenths of it would be a gain of more than a tenth over the honest score."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cluster_manager.core.models import Mode, RunResult, Task
from cluster_manager.core.task import load_task
from tests.adversarial.helpers import attack, ranked_at_least, request_for, stdout_of
from tests.conftest import EXAMPLES, FIXTURES
from tests.security.runners import run_entrypoint

pytestmark = pytest.mark.adversarial

WORK_S = 0.002  # what every kernel here really does per call
PROBLEMSET = FIXTURES / "problemset" / "vectorsum_py"  # judged by its own eval.py


def judged(task: Task, code: str, *, plain_user: bool) -> RunResult:
    """A ranked run of `code`, sandboxed: in this process as this user (root in CI), or
    through the runner's entrypoint as an ordinary user."""
    if not plain_user:
        return attack(task, code)
    request = request_for(task, code, Mode.LEADERBOARD)
    payload_dir = Path(tempfile.mkdtemp(prefix="cm-payload-"))  # where the user may read
    try:
        result, _, _ = run_entrypoint(request, plain_user=True, env={}, payload_dir=payload_dir)
    finally:
        shutil.rmtree(payload_dir, ignore_errors=True)
    return result


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


# A task's own eval.py judges here: the sandbox's filter, not the worker's, is all there is. A
# child of the submission (as where such a harness runs the submission in a child) tries to
# slow or move the harness, PID 1 of the sandbox, and every process of the user.
RESCHEDULE_THE_HARNESS = """
import json, os, resource
import torch
from task import input_t, output_t

HARNESS = 1


def attempt(call):
    try:
        call()
        return "ok"
    except OSError as exc:
        return exc.strerror


if os.fork() == 0:
    tried = {
        "renice harness": lambda: os.setpriority(os.PRIO_PROCESS, HARNESS, 19),
        "renice its group": lambda: os.setpriority(os.PRIO_PGRP, os.getpgid(HARNESS), 19),
        "renice the user": lambda: os.setpriority(os.PRIO_USER, 0, 19),
        "pin harness": lambda: os.sched_setaffinity(HARNESS, {min(os.sched_getaffinity(0))}),
        "idle harness": lambda: os.sched_setscheduler(HARNESS, os.SCHED_IDLE, os.sched_param(0)),
        "limit harness": lambda: resource.prlimit(HARNESS, resource.RLIMIT_CPU, (1, 1)),
        "renice itself": lambda: os.setpriority(os.PRIO_PROCESS, 0, 5),
        "pin itself": lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)),
    }
    print("TRIED", json.dumps({name: attempt(call) for name, call in tried.items()}), flush=True)
    os._exit(0)
os.wait()
with open(f"/proc/{HARNESS}/limits") as limits:  # prlimit may not even read PID 1's
    cpu_time = next(line.split()[3] for line in limits if line.startswith("Max cpu time"))
state = (os.getpriority(os.PRIO_PROCESS, HARNESS), len(os.sched_getaffinity(HARNESS)),
         os.sched_getscheduler(HARNESS), cpu_time)
print("HARNESS", json.dumps(state, separators=(",", ":")), len(os.sched_getaffinity(0)), flush=True)


def custom_kernel(data: input_t) -> output_t:
    return torch.sum(data)
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "under a task's own eval.py, a child of the submission renices the harness (PID 1), its "
    "group and the whole user, pins it to one CPU, makes it SCHED_IDLE and caps its CPU time",
    "each refused (EPERM) by the sandbox's filter, the harness's priority, CPUs, class and "
    "limits unchanged; the child may still renice and pin itself (root and ordinary user)",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "user"])
def test_a_tasks_own_harness_cannot_be_rescheduled(plain_user, record_property):
    result = judged(load_task(PROBLEMSET), RESCHEDULE_THE_HARNESS, plain_user=plain_user)
    lines = stdout_of(result).splitlines()
    tried = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("TRIED")]
    harness = [line.split()[1:] for line in lines if line.startswith("HARNESS")]
    record_property("observed", f"{result.verdict.value}: {tried[:1]}; harness {harness[:1]}")
    assert tried and harness, (result.message, lines[-20:])
    for attempts in tried:
        refused = {name: how for name, how in attempts.items() if "itself" not in name}
        assert set(refused.values()) == {"Operation not permitted"}, attempts
        assert attempts["renice itself"] == attempts["pin itself"] == "ok", attempts
    for state, cpus in ((json.loads(h[0]), int(h[1])) for h in harness):
        assert state[:3] == [0, cpus, os.SCHED_OTHER] and state[3] != "1", state
    assert result.passed, result.message
