"""The timed loop of a case, the same in benchmark and ranked runs and on any number of ranks:
every call on fresh inputs made here, checked here, and paired with the stand-in moving the
same data while the submission is stopped; scored by the harness's clock (`trusted.py`).
"""

from __future__ import annotations

import secrets
from typing import Any

from cluster_manager.core.models import Verdict
from cluster_manager.harness import case_run, timing, wire
from cluster_manager.harness.case_run import CaseRun, time_call
from cluster_manager.harness.outcome import Outcome
from cluster_manager.harness.trusted import TrustedClock

# The stand-in's first replays are cold (its first decode, its heap): on a loaded machine
# one took 14 ms to move what later ones moved in 0.1 ms.
STAND_IN_WARM_UP = 3


def paired_case(case: CaseRun, outputs: list[Any], rule: timing.StopRule) -> Outcome:
    """Times the case call by call (`outputs`: an honest output per rank, which the stand-in
    sends back in place of the kernel's). Its figures are never below the harness's clock
    (`TrustedClock.stats`), the same in every mode, so a ranked time is what the benchmark
    showed; the run fails only on what cannot happen honestly: a wrong output, a report
    longer than its window."""
    stand_in = case.stand_in
    stand_in.send("stand_in", outputs)
    stand_in.message(stand_in.receive())
    stand_in.freeze()
    clock = TrustedClock()
    fresh = case_run.fresh_seeds(case)

    def overhead(inputs: list[wire.Encoded]) -> float:
        """What moving the call's data takes the stand-in, rank by rank as the harness moves
        the ranks' data, with the submission stopped. It waits (the first rank's replay) as
        long as the calls typically report, so this process waits on it alike."""
        total = 0.0
        for r, data in enumerate(inputs):
            wait_ns = clock.typical_report_ns if r == 0 else 0.0
            replay = time_call([stand_in], [data], with_output=True, wait_ns=wait_ns, rank=r)
            reply = stand_in.message(replay.outputs[0])
            # Its waits for a CPU before its call began are the machine's load, not moving
            # data: it spun through its last replay, and a process that spun is kept waiting
            # where a kernel that slept is not. Those within its call leave its report and
            # its window alike; those after it, while its output leaves, a worker's output
            # meets too.
            waited = stand_in.waited_before_call(replay.waited_before_ns, reply)
            total += replay.window_ns - replay.reported_ns + replay.output_ns - waited
        return max(total, 0.0)

    def step(i: int) -> float:
        args = fresh(i)
        made = [case.inputs(args, r) for r in range(len(case.ranks))]
        data, inputs = [d for d, _ in made], [raw for _, raw in made]
        # Which goes first is a coin's toss: whatever favours one place in the order (the
        # harness's own time slice running out, caches) weighs on both alike.
        early = overhead(inputs) if secrets.randbits(1) else None
        call = case.timed_call(inputs, with_output=True)
        moving = overhead(inputs) if early is None else early
        trusted = clock.add(
            window_ns=call.window_ns + call.output_ns,
            overhead_ns=moving,
            reported_ns=call.reported_ns,
            report_window_ns=call.window_ns,
        )
        case.check(call.replies, args, data)
        return trusted

    for process in case.ranks:
        process.freeze()  # from here on, only inside its calls
    warm = [case.inputs(case.args, r)[1] for r in range(len(case.ranks))]
    for _ in range(STAND_IN_WARM_UP):
        overhead(warm)
    with timing.collections_paused():
        timing.measure(step, rule)
    problem = clock.problem()
    if problem:
        return Outcome(ok=False, error=problem, verdict=Verdict.RUNTIME_ERROR)
    return Outcome(ok=True, stats=clock.stats())
