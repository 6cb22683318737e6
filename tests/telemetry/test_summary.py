"""Samples summed up, throttling judged against a threshold, and the one-line report."""

from __future__ import annotations

import json

import pytest

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.telemetry import (
    PhaseTelemetry,
    Spread,
    summary_line,
    telemetry_from_json,
    throttling,
)
from cluster_manager.telemetry.probes import NoProbe
from cluster_manager.telemetry.summary import summarise
from tests.telemetry.fakes import CLEAN, HOT, IDLE, FakeProbe


def test_clean_samples_have_their_ranges_and_no_throttling():
    phase = summarise(FakeProbe([CLEAN]), [CLEAN] * 4, device="Fake GPU", interval_s=0.05)
    assert phase.samples == 4
    assert phase.probe == "fake" and phase.device == "Fake GPU"
    assert phase.quantities["sm_clock_mhz"] == Spread(1980, 1980, 1980)
    assert phase.quantities["power_limit_w"] == Spread(700, 700, 700)
    assert phase.throttled_share == 0 and phase.reasons == ()
    assert throttling({"leaderboard": phase}, 0.05) is None


def test_min_median_max_and_the_share_of_throttled_samples():
    samples = [CLEAN, CLEAN, HOT, IDLE]  # idling is no throttling
    phase = summarise(FakeProbe(samples), samples)
    assert phase.quantities["temperature_c"] == Spread(40, 61, 74)
    assert phase.quantities["sm_clock_mhz"] == Spread(345, 1867.5, 1980)
    assert "power_w" in phase.quantities  # read where the probe could
    assert phase.throttled_share == 0.25
    assert phase.reasons == ("gpu_idle", "sw_thermal_slowdown")


def test_a_share_past_the_threshold_is_throttling_with_its_kind():
    phase = summarise(FakeProbe([HOT]), [HOT, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN, CLEAN])
    assert phase.throttled_share == 0.125
    assert throttling({"leaderboard": phase}, 0.05) == (
        "the GPU throttled in 12 % of the samples (thermal)"
    )
    assert throttling({"leaderboard": phase}, 0.2) is None
    # Only the ranked phase decides; a benchmark's throttling is only reported.
    assert throttling({"benchmark": phase}, 0.05) is None


def test_power_and_hardware_slowdowns_count_too():
    power = HOT.__class__(sm_clock_mhz=1500, reasons=frozenset({"sw_power_cap", "hw_slowdown"}))
    phase = summarise(FakeProbe([power]), [power])
    assert throttling({"leaderboard": phase}, 0.05) == (
        "the GPU throttled in 100 % of the samples (power, hardware slowdown)"
    )


def test_no_samples_says_why():
    phase = summarise(NoProbe("NVML unavailable: no driver"), [])
    assert phase.samples == 0 and phase.unavailable == "NVML unavailable: no driver"
    assert throttling({"leaderboard": phase}, 0.0) is None
    assert summary_line({"leaderboard": phase}) is None


def test_the_report_line_shows_clock_temperature_and_power_ranges():
    samples = [CLEAN, HOT] + [CLEAN] * 141
    phase = summarise(FakeProbe(samples), samples)
    line = summary_line({"benchmark": phase})
    assert line == (
        "GPU: SM clock 1755–1980 MHz, 61–74 °C, 412–698 W, throttled in 1 % (thermal) "
        "(fake, 143 samples)"
    )
    assert summary_line({}) is None


@pytest.mark.parametrize("phases", [{}, {"leaderboard": PhaseTelemetry.none("no GPU")}])
def test_telemetry_round_trips_through_json(phases):
    samples = [CLEAN, HOT, IDLE]
    phases = {**phases, "benchmark": summarise(FakeProbe(samples), samples, interval_s=0.05)}
    result = RunResult(
        passed=True, verdict=Verdict.PASSED, mode=Mode.BENCHMARK, message="", telemetry=phases
    )
    data = json.loads(json.dumps(result.to_json()))
    assert data["telemetry"]["benchmark"]["quantities"]["temperature_c"] == {
        "min": 40,
        "median": 61,
        "max": 74,
    }
    assert RunResult.from_json(data) == result


def test_results_stored_before_telemetry_still_read():
    stored = RunResult(passed=True, verdict=Verdict.PASSED, mode=Mode.TEST, message="").to_json()
    del stored["telemetry"]
    assert RunResult.from_json(stored).telemetry == {}
    assert telemetry_from_json(None) == {}
