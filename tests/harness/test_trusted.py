"""The score of a timed case: never below the harness's clock (its median); a report is held
to its window, and is the figure only where it is the higher."""

from __future__ import annotations

import pytest

from cluster_manager.harness.trusted import TrustedClock


def _clock(windows: list[float], overhead: float = 100.0, reported: float = 1.0) -> TrustedClock:
    clock = TrustedClock()
    for window in windows:
        clock.add(
            window_ns=window, overhead_ns=overhead, reported_ns=reported, report_window_ns=window
        )
    return clock


def test_a_calls_duration_is_its_window_less_what_moving_its_data_took():
    clock = TrustedClock()
    trusted = clock.add(
        window_ns=5_000.0, overhead_ns=1_200.0, reported_ns=3_700.0, report_window_ns=4_000.0
    )
    assert trusted == 3_800.0
    assert clock.durations == [3_800.0] and clock.reported == [3_700.0]


def test_no_report_below_the_clock_changes_the_score():
    """The same windows with reports forged low (1 ns, none, a third of the truth) give the
    same figures: the clock's."""
    windows = [float(w) for w in range(10_100, 30_100, 100)]  # 10-30 µs after the overhead
    figures = {_clock(windows, reported=forged).stats() for forged in (1.0, 0.0, 6_000.0)}
    assert len(figures) == 1
    (stats,) = figures
    assert stats.mean == pytest.approx(20_000.0, rel=0.01)


def test_honest_reports_above_the_clock_are_the_figures():
    """Where the reports' mean is the higher (the clock's noise fell low), the reports count:
    precise, and nothing a cheat would choose."""
    clock = TrustedClock()
    for i in range(50):
        reported = 20_000.0 + (i % 5)
        clock.add(
            window_ns=30_000.0, overhead_ns=12_000.0, reported_ns=reported, report_window_ns=25e3
        )
    stats = clock.stats()
    assert stats.mean == pytest.approx(20_002.0)
    assert stats.best == 20_000.0 and stats.worst == 20_004.0
    assert clock.clock_ns == pytest.approx(18_000.0)


def test_reports_below_the_clock_are_raised_to_it_as_a_whole():
    clock = TrustedClock()
    for reported in (1_000.0, 2_000.0, 3_000.0):
        clock.add(window_ns=12e3, overhead_ns=2e3, reported_ns=reported, report_window_ns=12e3)
    stats = clock.stats()
    assert stats.mean == pytest.approx(10_000.0)
    assert (stats.best, stats.worst) == (pytest.approx(9_000.0), pytest.approx(11_000.0))


def test_noise_at_either_end_moves_nothing_and_every_call_is_counted():
    """A preempted call (a window 5 ms long) and a preempted replay (its overhead that long,
    the call's duration clamped at zero) do not move the clock's median."""
    clock = TrustedClock()
    for i in range(100):
        window = 5_000_000.0 if i == 3 else 20_000.0
        overhead = 5_000_000.0 if i == 7 else 10_000.0
        clock.add(window_ns=window, overhead_ns=overhead, reported_ns=1.0, report_window_ns=window)
    stats = clock.stats()
    assert stats.runs == 100
    assert clock.clock_ns == stats.mean == pytest.approx(10_000.0)


def test_the_stand_in_waits_as_long_as_calls_typically_report():
    clock = TrustedClock()
    assert clock.typical_report_ns == 0.0
    for reported in (100.0, 5_000.0, 120.0, 110.0):
        clock.add(window_ns=9e3, overhead_ns=1.0, reported_ns=reported, report_window_ns=9e3)
    assert clock.typical_report_ns == pytest.approx(115.0)  # one slow call does not move it


def test_a_report_longer_than_its_window_is_the_only_verdict():
    clock = _clock([10_000.0, 10_000.0])
    assert clock.problem() is None
    clock.add(window_ns=20_000.0, overhead_ns=1.0, reported_ns=50_000.0, report_window_ns=20_000.0)
    assert clock.problem() is not None
    assert "reported 1 call(s) longer than the harness saw them take" in str(clock.problem())
