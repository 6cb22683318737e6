"""The timing loop and its stopping rule, on fake clocks: deterministic, no sleeping."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_manager.harness import timing


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


def steps(durations: Iterator[float]):
    """A measurement step that 'times' the next of `durations`."""
    return lambda i: float(next(durations))


def test_constant_durations_stop_at_the_minimum_run_count():
    rule = timing.StopRule(min_runs=3)
    stats = timing.measure(steps(itertools.repeat(1000)), rule, clock=fake_clock(1))
    assert stats.runs == 3 and stats.mean == 1000


def test_noisy_durations_run_until_the_relative_error_is_small():
    # Alternating 900/1100: std/mean = 0.1, so err/mean < 0.001 needs n > 10,000 -> max_runs.
    rule = timing.StopRule(min_runs=3, max_runs=500, wall_budget_ns=1e18)
    stats = timing.measure(steps(itertools.cycle([900, 1100])), rule, clock=fake_clock(1))
    assert stats.runs == 500
    assert stats.mean == pytest.approx(1000)


def test_loose_target_stops_early_once_the_error_is_below_it():
    rule = timing.StopRule(target_rel_err=0.02, min_runs=3, max_runs=10_000, wall_budget_ns=1e18)
    stats = timing.measure(steps(itertools.cycle([900, 1100])), rule, clock=fake_clock(1))
    # err/mean = 0.1/sqrt(n) < 0.02  <=>  n > 25
    assert 25 <= stats.runs <= 30


def test_wall_budget_stops_a_slow_benchmark():
    rule = timing.StopRule(min_runs=3, wall_budget_ns=10_000)
    # Every clock read advances 1 µs.
    stats = timing.measure(steps(itertools.cycle([900, 1100])), rule, clock=fake_clock(1000))
    assert stats.runs < 20


def test_a_floor_of_calls_outlasts_the_budget_up_to_its_own():
    # Every clock read advances 1 ms: the 2 ms budget ends after one call, the floor's does not.
    rule = timing.StopRule(min_runs=3, wall_budget_ns=2e6, floor_runs=10, floor_budget_ns=1e9)
    clock = fake_clock(1_000_000)
    assert timing.measure(steps(itertools.repeat(5.0)), rule, clock=clock).runs == 10
    short = timing.StopRule(min_runs=3, wall_budget_ns=2e6, floor_runs=10, floor_budget_ns=4e6)
    assert (
        timing.measure(steps(itertools.repeat(5.0)), short, clock=fake_clock(1_000_000)).runs < 10
    )


def test_a_quick_floor_is_taken_with_no_budget_left():
    """Starting up on a loaded machine can spend the whole budget: calls of a millisecond
    (each clock read advances 1 ms) still get the floor inside the 20 ms grace, calls whose
    floor would outlast it do not."""
    spent = timing.StopRule(wall_budget_ns=0, floor_runs=10, floor_grace_ns=20e6)
    assert (
        timing.measure(steps(itertools.repeat(5.0)), spent, clock=fake_clock(1_000_000)).runs == 10
    )
    slow = timing.StopRule(wall_budget_ns=0, floor_runs=10, floor_grace_ns=20e6)
    assert timing.measure(steps(itertools.repeat(5.0)), slow, clock=fake_clock(3_000_000)).runs == 1


def test_a_failing_step_ends_the_measurement():
    def step(i: int) -> float:
        if i == 4:
            raise ValueError("wrong on iteration 4")
        return 7.0

    with pytest.raises(ValueError, match="iteration 4"):
        timing.measure(step, timing.StopRule(min_runs=100, max_runs=1000), clock=fake_clock(1))


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
