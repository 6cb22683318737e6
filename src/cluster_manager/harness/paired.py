"""The timed loop of a case on one rank, the same in benchmark and ranked runs: every call
next to the stand-in's replay of it (`witness.PairedWitness`), timed once more when the
witness flags it (`retiming.py`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cluster_manager.core.models import Verdict
from cluster_manager.harness import case_run, retiming, timing, wire
from cluster_manager.harness.case_run import CaseRun, TimedCall, time_call
from cluster_manager.harness.outcome import Outcome
from cluster_manager.harness.witness import PAIRED_MIN_CALLS, PairedWitness

# proc(5): /proc/PID/stat's "processor", the CPU last run on, counted after the ")" that
# ends the command name.
PROCESSOR_FIELD = 36
_clock = time.perf_counter_ns


def paired_case(
    case: CaseRun,
    output: Any,
    rule: timing.StopRule,
    retimings: retiming.Retimings,
    *,
    ranked: bool = False,
) -> Outcome:
    """The timed loop of one rank, the same in benchmark and ranked runs (so a ranked time is
    what the benchmark showed): every timed call on fresh inputs made here, checked here, and
    replayed right before or after by the stand-in, which takes the same inputs, waits as long
    as the submission reported last and returns an output of the same size. Durations count
    as reported: the run fails instead if the submission's calls took longer around its
    reports than the stand-in's, beyond what noise explains (`PairedWitness`), in this timing
    and, when `retimings` allows one, in another. A `ranked` timing with too few pairs, or
    too noisy, to judge is not scored."""
    stand_in = case.stand_in
    stand_in.send("stand_in", output)
    stand_in.message(stand_in.receive())
    began = _clock()
    stats, witness = paired_timing(case, rule, settle=ranked)
    problem = witness.problem()
    if (problem or (ranked and witness.too_noisy())) and retimings.take():
        # The share kept free for it (`Harness.run_benchmarks`), and what the first timing
        # left of the case's time for the witness's pairs.
        left_ns = max(0.0, rule.floor_budget_ns - (_clock() - began))
        again_rule = replace(rule, floor_budget_ns=rule.wall_budget_ns + left_ns)
        stats, again = paired_timing(case, again_rule, settle=ranked)
        # A flagged timing needs a clearly clean second one; one too noisy to judge, a
        # second that can judge, whichever way it does.
        settled = problem is None and again.problem() is None and retiming.judges(again)
        if retiming.clears(again, ranked=ranked) or settled:
            problem, witness = None, again
        elif problem is None:
            problem = again.problem()
    if problem:
        return Outcome(ok=False, error=problem, verdict=Verdict.RUNTIME_ERROR)
    if ranked and witness.pairs < PAIRED_MIN_CALLS:
        return Outcome(
            ok=False, error=retiming.too_few_pairs(witness, stats), verdict=Verdict.TIMEOUT
        )
    if ranked and witness.too_noisy():
        return Outcome(ok=False, error=retiming.too_noisy(witness, stats), verdict=Verdict.TIMEOUT)
    return Outcome(ok=True, stats=stats)


def paired_timing(
    case: CaseRun, rule: timing.StopRule, *, settle: bool = False
) -> tuple[timing.Stats, PairedWitness]:
    """One timing of the case, call by call against the stand-in's replays, and the witness
    that holds what the pairs showed. With `settle` (ranked), it goes on while the pairs are
    too noisy to judge, within the rule's floor budget."""
    stand_in = case.stand_in
    witness = PairedWitness(case.calibration)
    timer_ns = case.calibration.timer_ns
    fresh = case_run.fresh_seeds(case)

    last_ns = 0.0  # the stand-in waits as long as the submission's last call reported

    def replay(inputs: wire.Encoded) -> TimedCall:
        replayed = time_call([stand_in], [inputs], with_output=True, wait_ns=last_ns)
        stand_in.message(replayed.outputs[0])
        return replayed

    worker_pid, stand_in_pid = case.ranks[0].process.pid, stand_in.process.pid

    def step(i: int) -> float:
        nonlocal last_ns
        args = fresh(i)
        data, inputs = case.inputs(args, 0)
        _follow(stand_in_pid, worker_pid)
        # Which goes first is a coin's toss: whatever favours one place in the order (the
        # harness's own time slice running out, caches) weighs on both alike.
        early = replay(inputs) if secrets.randbits(1) else None
        call = case.timed_call([inputs], with_output=True)
        last_ns = call.reported_ns
        late = replay(inputs) if early is None else early
        witness.add(
            (call.window_ns, call.reported_ns, call.output_ns),
            (late.window_ns, late.reported_ns, late.output_ns),
        )
        case.check(call.replies, args, [data])
        return max(call.reported_ns - timer_ns, 0.0)

    with timing.collections_paused():
        stats = timing.measure(step, rule, unsettled=witness.too_noisy if settle else None)
    if stand_in_pid:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(stand_in_pid, os.sched_getaffinity(0))
    return stats, witness


def _follow(stand_in: int | None, worker: int | None) -> None:
    """Moves the stand-in to the CPU the worker last ran on: a wake-up on a busy CPU waits for
    it, so two processes that live on different CPUs see different delays under load, which
    the pairing would take for hidden work. The worker (and the kernel's threads) stay free."""
    if not stand_in or not worker:
        return
    try:
        stat = Path(f"/proc/{worker}/stat").read_text()
        cpu = int(stat.rsplit(")", 1)[1].split()[PROCESSOR_FIELD])
        if cpu in os.sched_getaffinity(0):
            os.sched_setaffinity(stand_in, {cpu})
    except (OSError, ValueError, IndexError):
        pass  # the worker is gone, or the CPU is not ours: the pairing goes on as it is
