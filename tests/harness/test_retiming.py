"""A case whose timing the witness flags is timed once more per phase: an honest timing that
a burst of load flagged passes the second time, hidden work fails both."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cluster_manager.core.models import Verdict
from cluster_manager.harness import cases, timing

STATS = timing.calculate_stats([1000.0, 1100.0, 900.0])
FLAGGED = "each timed call took 50.0 µs longer by the harness's clock"


def _case() -> SimpleNamespace:
    stand_in = SimpleNamespace(send=lambda *a: None, receive=lambda: None, message=lambda r: {})
    return SimpleNamespace(stand_in=stand_in)


@pytest.fixture
def timings(monkeypatch) -> list[str | None]:
    """What each timing of the case finds, in order; each one taken is removed."""
    found: list[str | None] = []

    def timed(case, rule):
        return STATS, found.pop(0)

    monkeypatch.setattr(cases, "_paired_timing", timed)
    return found


def test_a_timing_flagged_once_is_timed_again_and_passes(timings):
    timings += [FLAGGED, None]
    outcome = cases._paired_case(_case(), None, timing.StopRule(), cases.Retimings())
    assert outcome.ok and outcome.stats == STATS
    assert timings == []


def test_a_timing_flagged_twice_fails_with_the_witness_finding(timings):
    timings += [FLAGGED, FLAGGED]
    outcome = cases._paired_case(_case(), None, timing.StopRule(), cases.Retimings())
    assert not outcome.ok and outcome.verdict is Verdict.RUNTIME_ERROR
    assert outcome.error == FLAGGED


def test_a_phase_times_only_one_flagged_case_again(timings):
    retimings = cases.Retimings()
    timings += [FLAGGED, None, FLAGGED, None]
    first = cases._paired_case(_case(), None, timing.StopRule(), retimings)
    second = cases._paired_case(_case(), None, timing.StopRule(), retimings)
    assert first.ok and not second.ok
    assert timings == [None]  # the second case was not timed again
