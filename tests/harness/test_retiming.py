"""A case whose timing the witness flags is timed once more per phase: an honest timing that
a burst of load flagged passes when the second is clearly clean, hidden work fails. A ranked
timing with too few pairs to judge is not scored."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cluster_manager.core.models import Verdict
from cluster_manager.harness import paired, timing
from cluster_manager.harness.retiming import Retimings
from cluster_manager.harness.witness import PAIRED_MIN_CALLS

STATS = timing.calculate_stats([1000.0, 1100.0, 900.0])
FLAGGED = "each timed call took 50.0 µs longer by the harness's clock"


def _case() -> SimpleNamespace:
    stand_in = SimpleNamespace(send=lambda *a: None, receive=lambda: None, message=lambda r: {})
    return SimpleNamespace(stand_in=stand_in)


class Found:
    """What a timing's witness found: a problem, or how much of its tolerance it used, from
    how many pairs, with what tolerance."""

    def __init__(
        self,
        problem: str | None,
        share: float = 0.0,
        *,
        pairs: int = PAIRED_MIN_CALLS,
        tolerance_ns: float = 10_000.0,
        noisy: bool = False,
    ) -> None:
        self._problem, self._share = problem, share
        self.pairs, self._tolerance_ns, self._noisy = pairs, tolerance_ns, noisy

    def problem(self) -> str | None:
        return self._problem

    def hidden_ns(self) -> float:
        return self._share * self._tolerance_ns

    def tolerance_ns(self) -> float:
        return self._tolerance_ns

    def noise_ns(self) -> float:
        return self._tolerance_ns

    def too_noisy(self) -> bool:
        return self._noisy


CLEAN = None  # a timing that found nothing, with no excess


@pytest.fixture
def timings(monkeypatch) -> list[Found | None]:
    """What each timing of the case finds, in order; each one taken is removed."""
    found: list[Found | None] = []

    def timed(case, rule, settle=False):
        return STATS, found.pop(0) or Found(None)

    monkeypatch.setattr(paired, "paired_timing", timed)
    return found


def test_a_timing_flagged_once_is_timed_again_and_passes(timings):
    timings += [Found(FLAGGED), Found(None, share=0.4)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings())
    assert outcome.ok and outcome.stats == STATS
    assert timings == []


def test_a_second_timing_that_scrapes_under_its_tolerance_does_not_clear_the_first(timings):
    timings += [Found(FLAGGED), Found(None, share=0.9)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings())
    assert not outcome.ok and outcome.error == FLAGGED


def test_a_timing_flagged_twice_fails_with_the_witness_finding(timings):
    timings += [Found(FLAGGED), Found(FLAGGED)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings())
    assert not outcome.ok and outcome.verdict is Verdict.RUNTIME_ERROR
    assert outcome.error == FLAGGED


def test_a_phase_times_only_one_flagged_case_again(timings):
    retimings = Retimings()
    timings += [Found(FLAGGED), CLEAN, Found(FLAGGED), CLEAN]
    first = paired.paired_case(_case(), None, timing.StopRule(), retimings)
    second = paired.paired_case(_case(), None, timing.StopRule(), retimings)
    assert first.ok and not second.ok
    assert timings == [CLEAN]  # the second case was not timed again


def test_a_second_timing_with_too_few_pairs_does_not_clear_the_first(timings):
    """A loaded machine leaves the second timing a few pairs, whose tolerance is wide: wide
    enough to excuse a quarter of every call hidden from the timer."""
    timings += [Found(FLAGGED), Found(None, share=0.1, pairs=PAIRED_MIN_CALLS - 1)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings())
    assert not outcome.ok and outcome.error == FLAGGED


def test_a_ranked_timing_with_too_few_pairs_is_not_scored(timings):
    timings += [Found(None, pairs=3)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings(), ranked=True)
    assert not outcome.ok and outcome.verdict is Verdict.TIMEOUT
    assert f"only 3 timed call(s) of {STATS.mean / 1e6:.1f} ms" in outcome.error
    assert f"takes {PAIRED_MIN_CALLS}" in outcome.error


def test_a_benchmark_timing_with_few_pairs_is_shown(timings):
    """Benchmark mode ranks nothing: its few pairs are judged with a wider tolerance."""
    timings += [Found(None, pairs=3)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings())
    assert outcome.ok and outcome.stats == STATS


def test_a_ranked_timing_too_noisy_to_judge_is_timed_again_and_then_not_scored(timings):
    timings += [Found(None, noisy=True), Found(None, noisy=True)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings(), ranked=True)
    assert not outcome.ok and outcome.verdict is Verdict.TIMEOUT
    assert outcome.error.startswith("the machine was too busy to check this case's timings")
    assert "submitting again may pass" in outcome.error
    assert timings == []


def test_a_ranked_timing_too_noisy_once_passes_when_the_second_is_clean(timings):
    timings += [Found(None, noisy=True), Found(None, share=0.2)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings(), ranked=True)
    assert outcome.ok and outcome.stats == STATS


def test_a_noisy_benchmark_timing_is_shown(timings):
    timings += [Found(None, noisy=True)]
    outcome = paired.paired_case(_case(), None, timing.StopRule(), Retimings())
    assert outcome.ok and timings == []  # not timed again either


def test_a_second_timing_that_judges_a_too_noisy_first_convicts_or_clears(timings):
    """The first timing could not judge; the second can: its finding stands, either way."""
    timings += [Found(None, noisy=True), Found(FLAGGED)]
    caught = paired.paired_case(_case(), None, timing.StopRule(), Retimings(), ranked=True)
    assert not caught.ok and caught.verdict is Verdict.RUNTIME_ERROR
    assert caught.error == FLAGGED
    timings += [Found(None, noisy=True), Found(None, share=0.9)]
    passed = paired.paired_case(_case(), None, timing.StopRule(), Retimings(), ranked=True)
    assert passed.ok


def test_a_noisy_second_timing_clears_a_flagged_benchmark_timing_but_not_a_ranked_one(timings):
    """Benchmark mode shows noisy timings: noise alone does not keep its second timing from
    clearing the first. A ranked one must be narrow enough to judge."""
    timings += [Found(FLAGGED), Found(None, share=0.2, noisy=True)]
    assert paired.paired_case(_case(), None, timing.StopRule(), Retimings()).ok
    timings += [Found(FLAGGED), Found(None, share=0.2, noisy=True)]
    ranked = paired.paired_case(_case(), None, timing.StopRule(), Retimings(), ranked=True)
    assert not ranked.ok and ranked.error == FLAGGED
