"""The steps each mode takes on a case (a checked call, the timed loop of a benchmark, a
profile) and the calibration of the clocks they use. A single rank's timed loop pairs every
call with the trusted stand-in's replay (`paired.py`); several ranks' are checked against the
calibration (`witness.ClockWitness`).
"""

from __future__ import annotations

from cluster_manager.core.models import Verdict
from cluster_manager.harness import case_run, paired, retiming, timing
from cluster_manager.harness.case_run import CaseRun
from cluster_manager.harness.checks import Reference
from cluster_manager.harness.outcome import Outcome
from cluster_manager.harness.witness import Calibration, ClockWitness
from cluster_manager.harness.workers import Workers

CALIBRATION_CALLS = 50
# A call that keeps the harness waiting lets its core idle: the reply takes longer to see than
# an empty call's (about 40 µs more on a 2-core VM). Real calls are calibrated on a busy wait.
CALIBRATION_BUSY_NS = 200_000


def calibrate(workers: Workers, reference: Reference, world_sizes: set[int | None]) -> None:
    """Calibrates each world size the cases use (with the ranks' barriers when several)."""
    for world_size in sorted(world_sizes, key=lambda w: w or 0):
        case = CaseRun(workers, reference, {} if world_size is None else {"world_size": world_size})
        case.open(calibration=True)
        empty = [case.timed_call() for _ in range(CALIBRATION_CALLS)]
        case.everywhere("busy", CALIBRATION_BUSY_NS)
        busy = [case.timed_call() for _ in range(CALIBRATION_CALLS)]
        case.close()
        workers.calibrations[world_size] = Calibration.of_calls(
            empty=[call.reported_ns for call in empty],
            busy=[(call.window_ns, call.reported_ns) for call in busy],
            timer=world_size is None,
        )


def check_case(case: CaseRun) -> Outcome:
    return Outcome(ok=True, message=case.check(case.everywhere("call")))


def benchmark_case(
    case: CaseRun,
    *,
    recheck: bool,
    rule: timing.StopRule,
    retimings: retiming.Retimings | None = None,
) -> Outcome:
    # One checked call first: it also triggers any JIT compilation for this shape.
    first = case.everywhere("call")
    case.check(first)
    case.everywhere("warm_up")
    if case.world_size is None:
        output = first[0].get("output")
        return paired.paired_case(
            case, output, rule, retimings or retiming.Retimings(0), ranked=recheck
        )
    witness = ClockWitness(case.calibration)
    timer_ns = case.calibration.timer_ns
    fresh = case_run.fresh_seeds(case) if recheck else None

    def step(i: int) -> float:
        args, data, inputs = case.args, None, None
        if fresh is not None:
            args = fresh(i)
            made = [case.inputs(args, r) for r in range(len(case.ranks))]
            data, inputs = [d for d, _ in made], [raw for _, raw in made]
        call = case.timed_call(inputs, with_output=recheck)
        witness.add_call(call.window_ns, call.reported_ns, case.stand_in.round_trip())
        if recheck:
            case.check(call.replies, args, data)
        # What the timer adds to every call (0.5-1 µs on a CPU) is not the kernel's time.
        return max(call.reported_ns - timer_ns, 0.0)

    with timing.collections_paused():
        stats = timing.measure(step, rule)
    problem = witness.problem()
    if problem:
        return Outcome(ok=False, error=problem, verdict=Verdict.RUNTIME_ERROR)
    return Outcome(ok=True, stats=stats)


def profile_case(case: CaseRun) -> Outcome:
    reply = case.everywhere("profile")[0]
    report = str(reply.get("report") or "")
    trace = str(reply.get("trace") or "")
    if not trace and reply.get("trace_bytes"):
        report += f"\n(the Chrome trace, {reply['trace_bytes']} bytes, is too big to send)"
    return Outcome(ok=True, report=report, trace=trace)
