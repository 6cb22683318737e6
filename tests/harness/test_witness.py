"""The harness's clock around the worker's reports: honest noise passes, forged reports fail."""

from __future__ import annotations

import pytest

from cluster_manager.harness.witness import (
    ALLOWANCE_CAP_NS,
    ALLOWANCE_FLOOR_NS,
    CALL_SHARE,
    ECHO_FACTOR,
    SLACK_MARGIN_NS,
    SLACK_SHARE,
    TRANSFER_SHARE,
    Calibration,
    ClockWitness,
    trimmed_mean,
)

BASELINE = 30_000.0  # calibrated slack of honest empty calls
ECHO = 50_000.0  # the trusted round trip, 50 µs


def witness_of(
    calls: list[tuple[float, float]], transfers: list[float] | None = None
) -> ClockWitness:
    """`calls`: (the window the harness saw, the reported duration)."""
    witness = ClockWitness(Calibration(slack_ns=BASELINE), transfer_ns=200_000.0)
    for window, reported in calls:
        witness.add_call(window, reported, ECHO)
    for elapsed in transfers or []:
        witness.add_transfer(elapsed, size=0)
    return witness


def test_honest_calls_with_load_spikes_pass():
    # 1 ms calls; replies delayed 0-150 µs more than the echo, and two 5 ms preemptions.
    extra = [0, 150e3, 20e3, 100e3, 0, 5e6, 15e3, 0, 5e6, 60e3] * 3
    calls = [(1e6 + ECHO + e, 1e6) for e in extra]
    assert witness_of(calls).problem() is None


def test_the_trimmed_mean_leaves_out_the_highest_tenth():
    assert trimmed_mean([1.0] * 9 + [1000.0]) == 1.0
    assert trimmed_mean([1.0] * 8 + [1000.0] * 2) == pytest.approx(112.0)
    assert trimmed_mean([5.0]) == 5.0


def test_a_forged_1_ns_report_of_a_2_ms_call_fails():
    problem = witness_of([(2e6 + ECHO, 1.0)] * 20).problem()
    assert problem is not None and "timer was changed" in problem
    assert "2050 µs longer" in problem


def test_forging_half_of_the_10_ms_calls_fails():
    calls = [(10e6 + ECHO, 10e6)] * 10 + [(10e6 + ECHO, 1.0)] * 10
    assert witness_of(calls).problem() is not None


def test_what_a_forged_report_can_hide_is_bounded():
    witness = witness_of([(1e6, 1e6)])
    bound = BASELINE + ECHO_FACTOR * ECHO + SLACK_MARGIN_NS + SLACK_SHARE * 1e6
    assert witness.allowed_slack_ns == pytest.approx(bound)
    assert witness_of([(1e6 + bound * 0.9, 1e6)] * 5).problem() is None
    assert witness_of([(1e6 + bound * 1.3, 1e6)] * 5).problem() is not None


def test_a_report_longer_than_the_window_is_impossible():
    problem = witness_of([(1e6, 1e6)] * 10 + [(1e6, 3e6)]).problem()
    assert problem is not None and "longer than the harness saw" in problem


def test_outputs_that_arrive_late_show_work_finished_after_the_timer():
    calls = [(1e6 + ECHO, 1e6)] * 10
    assert witness_of(calls, [300e3] * 10).problem() is None
    problem = witness_of(calls, [20e6] * 10).problem()
    assert problem is not None and "after the timer stopped" in problem


def test_a_slow_echo_widens_the_allowance():
    # A loaded host: the echo's slow tail is 2 ms; a 30 µs call's reply waits 2.3 ms too.
    witness = ClockWitness(Calibration(slack_ns=BASELINE))
    for i in range(20):
        witness.add_call(30e3 + 2.3e6, 30e3, echo_ns=2e6 if i % 4 == 0 else 100e3)
    assert witness.problem() is None


def test_calibration_takes_the_slack_of_busy_calls_and_the_timer_of_empty_ones():
    busy = [(200e3 + 40e3 + 1e3 * i, 200e3) for i in range(10)]  # slack 40-49 µs
    calibration = Calibration.of_calls(empty=[1e3, 2e3, 1e3], busy=busy, timer=True)
    assert calibration.slack_ns == pytest.approx(44.5e3)
    assert calibration.spread_ns == pytest.approx(49e3 - 44.5e3)
    assert calibration.timer_ns == pytest.approx(1e3)
    # Several ranks: the empty call's report is their barrier, not the timer's cost.
    assert Calibration.of_calls(empty=[1e3], busy=busy, timer=False).timer_ns == 0.0


def test_the_allowance_follows_the_spread_within_its_bounds():
    assert Calibration(spread_ns=30e3).allowance_ns == pytest.approx(60e3)
    assert Calibration(spread_ns=1e3).allowance_ns == ALLOWANCE_FLOOR_NS
    assert Calibration(spread_ns=5e6).allowance_ns == ALLOWANCE_CAP_NS


def shortfall(windows: list[float], durations: list[float]) -> float:
    witness = ClockWitness(Calibration(slack_ns=50e3, spread_ns=15e3))  # allowance 30 µs
    for window, duration in zip(windows, durations, strict=True):
        witness.add_call(window, duration, ECHO)
    return witness.shortfall_ns()


def test_forged_reports_are_held_to_the_harness_clock_less_the_allowances():
    # 10 ms calls seen here, reported as 7.5 ms: they count 10 ms - 30 µs - 1 % of 7.5 ms.
    assert shortfall([10e6 + 50e3] * 10, [7.5e6] * 10) == pytest.approx(
        2.5e6 - 30e3 - CALL_SHARE * 7.5e6
    )


def test_honest_reports_within_the_allowances_are_not_moved():
    reports = [1e6 + i for i in range(10)]
    noise = [25e3, 0, 60e3, 5e3, 40e3, 10e3, 0, 20e3, 35e3, 15e3]  # 60 µs at worst, 21 on average
    windows = [r + 50e3 + n for r, n in zip(reports, noise, strict=True)]
    assert shortfall(windows, reports) == 0.0


def test_the_worst_two_percent_of_windows_are_left_out_as_spikes():
    reports = [100e3] * 100
    windows = [r + 50e3 for r in reports]
    windows[7] += 40e6  # two preemptions of 40 and 30 ms around the call
    windows[42] += 30e6
    assert shortfall(windows, reports) == 0.0
    windows[60] += 5e6  # a third: beyond the share, so it counts, averaged over the calls
    per_call = -30e3 - CALL_SHARE * 100e3  # what each honest call leaves unclaimed
    expected = (5e6 + 98 * per_call) / 98
    assert expected > 0
    assert shortfall(windows, reports) == pytest.approx(expected)


def test_shaving_a_few_calls_wholesale_is_bounded_by_the_spike_share():
    reports = [1e6] * 100
    windows = [r + 50e3 for r in reports]
    forged = [1.0 if i % 10 == 0 else r for i, r in enumerate(reports)]  # a tenth at 1 ns
    # Ten calls short by 1 ms; two of them left out as spikes: the mean is lifted by 8 of them.
    lifted = (8 * (1e6 - 1.0) - 98 * 30e3 - CALL_SHARE * (90 * 1e6 + 8 * 1.0)) / 98
    assert shortfall(windows, forged) == pytest.approx(lifted)


def test_work_moved_after_the_reply_is_counted_beyond_its_allowance():
    calibration = Calibration(spread_ns=15e3)  # allowance 30 µs
    allowed = 30e3 + TRANSFER_SHARE * 200e3
    honest = ClockWitness(calibration, transfer_ns=200e3, transfer_bytes=4096)
    for elapsed in [150e3, 210e3, 260e3, 190e3, 5e6]:  # one load spike
        honest.add_transfer(elapsed, 4096)
    assert honest.hidden_after_timer_ns() == 0.0
    forged = ClockWitness(calibration, transfer_ns=200e3, transfer_bytes=4096)
    for _ in range(5):
        forged.add_transfer(200e3 + 3e6, 4096)  # 3 ms of work after each reply
    assert forged.hidden_after_timer_ns() == pytest.approx(3e6 - allowed)


def test_a_smaller_output_than_the_first_is_expected_sooner():
    # The first output was inflated to 8 KiB to widen the estimate; later ones are 4 KiB.
    witness = ClockWitness(Calibration(), transfer_ns=400e3, transfer_bytes=8192)
    for _ in range(5):
        witness.add_transfer(200e3 + 1e6, 4096)
    assert witness.hidden_after_timer_ns() == pytest.approx(1e6 - 20e3 - TRANSFER_SHARE * 400e3)
