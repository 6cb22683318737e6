"""The steps each mode takes on a case: a checked call, the timed loop of a benchmark (the
same in ranked runs and on any number of ranks: `paired.py`), a profile.
"""

from __future__ import annotations

from cluster_manager.harness import paired, timing
from cluster_manager.harness.case_run import CaseRun
from cluster_manager.harness.outcome import Outcome


def check_case(case: CaseRun) -> Outcome:
    return Outcome(ok=True, message=case.check(case.everywhere("call")))


def benchmark_case(case: CaseRun, *, rule: timing.StopRule) -> Outcome:
    # One checked call first: it also triggers any JIT compilation for this shape, and its
    # outputs are what the stand-in sends back in its replays.
    first = case.everywhere("call")
    case.check(first)
    case.everywhere("warm_up")
    return paired.paired_case(case, [reply.get("output") for reply in first], rule)


def profile_case(case: CaseRun) -> Outcome:
    reply = case.everywhere("profile")[0]
    report = str(reply.get("report") or "")
    trace = str(reply.get("trace") or "")
    if not trace and reply.get("trace_bytes"):
        report += f"\n(the Chrome trace, {reply['trace_bytes']} bytes, is too big to send)"
    return Outcome(ok=True, report=report, trace=trace)
