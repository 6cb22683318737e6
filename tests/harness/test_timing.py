"""The timing loop and its stopping rule, on fake clocks: deterministic, no sleeping."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_manager.harness import timing


class FakeTimer:
    """Hands out pre-set durations, one per timed call."""

    def __init__(self, durations):
        self._durations = iter(durations)
        self.calls = 0

    def start(self) -> None:
        self.calls += 1

    def stop(self) -> float:
        return float(next(self._durations))


def fake_clock(step_ns: int):
    counter = itertools.count(0, step_ns)
    return lambda: next(counter)


def test_stats_match_the_textbook_definitions():
    stats = timing.calculate_stats([10.0, 20.0, 30.0, 40.0])
    assert stats.runs == 4
    assert stats.mean == 25.0
    assert stats.std == pytest.approx(math.sqrt(500 / 3))
    assert stats.err == pytest.approx(stats.std / 2)
    assert (stats.best, stats.worst) == (10.0, 40.0)


def test_single_run_has_zero_spread_and_empty_is_refused():
    assert timing.calculate_stats([5.0]).std == 0.0
    with pytest.raises(ValueError):
        timing.calculate_stats([])


@given(st.lists(st.floats(min_value=1.0, max_value=1e9), min_size=2, max_size=200))
def test_running_moments_agree_with_the_batch_statistics(samples: list[float]):
    moments = timing.RunningMoments()
    for sample in samples:
        moments.add(sample)
    batch = timing.calculate_stats(samples)
    assert moments.runs == batch.runs
    assert moments.mean == pytest.approx(batch.mean, rel=1e-9)
    assert moments.err == pytest.approx(batch.err, rel=1e-6, abs=1e-6 * batch.mean)


def test_constant_durations_stop_at_the_minimum_run_count():
    rule = timing.StopRule(min_runs=3)
    stats = timing.measure(
        lambda i: timing.Iteration(i),
        lambda arg: arg,
        FakeTimer(itertools.repeat(1000)),
        rule,
        clock=fake_clock(1),
    )
    assert isinstance(stats, timing.Stats)
    assert stats.runs == 3 and stats.mean == 1000


def test_noisy_durations_run_until_the_relative_error_is_small():
    # Alternating 900/1100: std/mean = 0.1, so err/mean < 0.001 needs n > 10,000 -> max_runs.
    rule = timing.StopRule(min_runs=3, max_runs=500, wall_budget_ns=1e18)
    stats = timing.measure(
        lambda i: timing.Iteration(None),
        lambda arg: arg,
        FakeTimer(itertools.cycle([900, 1100])),
        rule,
        clock=fake_clock(1),
    )
    assert stats.runs == 500
    assert stats.mean == pytest.approx(1000)


def test_loose_target_stops_early_once_the_error_is_below_it():
    rule = timing.StopRule(target_rel_err=0.02, min_runs=3, max_runs=10_000, wall_budget_ns=1e18)
    stats = timing.measure(
        lambda i: timing.Iteration(None),
        lambda arg: arg,
        FakeTimer(itertools.cycle([900, 1100])),
        rule,
        clock=fake_clock(1),
    )
    # err/mean = 0.1/sqrt(n) < 0.02  <=>  n > 25
    assert 25 <= stats.runs <= 30


def test_wall_budget_stops_a_slow_benchmark():
    rule = timing.StopRule(min_runs=3, wall_budget_ns=10_000)
    stats = timing.measure(
        lambda i: timing.Iteration(None),
        lambda arg: arg,
        FakeTimer(itertools.cycle([900, 1100])),
        rule,
        clock=fake_clock(1000),  # every clock read advances 1 µs
    )
    assert stats.runs < 20


def test_a_failing_recheck_stops_measurement_with_its_error():
    def prepare(i):
        return timing.Iteration(i, check=lambda out: "wrong on iteration 4" if out == 4 else None)

    result = timing.measure(
        prepare,
        lambda arg: arg,
        FakeTimer(itertools.repeat(7)),
        timing.StopRule(min_runs=100, max_runs=1000),
        clock=fake_clock(1),
    )
    assert result == "wrong on iteration 4"


def test_agree_hook_can_overrule_the_local_stop_decision():
    decisions = []

    def agree(stop: bool) -> bool:
        decisions.append(stop)
        return len(decisions) >= 7  # "rank 0" decides: seven iterations

    stats = timing.measure(
        lambda i: timing.Iteration(None),
        lambda arg: arg,
        FakeTimer(itertools.repeat(5)),
        timing.StopRule(min_runs=3),
        agree=agree,
        clock=fake_clock(1),
    )
    assert stats.runs == 7
    assert decisions[2] is True  # locally it would have stopped after three


def test_warm_up_honours_both_count_and_budget():
    calls = []
    n = timing.warm_up(
        lambda: calls.append(1), lambda: None, min_calls=3, budget_ns=10, clock=fake_clock(1)
    )
    assert n == len(calls) >= 3


def test_cpu_timer_measures_real_elapsed_time():
    timer = timing.CpuTimer()
    timer.start()
    total = sum(range(200_000))
    elapsed = timer.stop()
    assert total > 0 and elapsed > 0
