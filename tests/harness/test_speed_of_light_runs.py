"""The runner puts each timed case against the speed of light, outside the task's processes:
the GPU type's published peaks come with the request, a CPU runner measures its machine's
once (cached), and a ranked case over 100 % of a published peak is held for review."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from cluster_manager.core.models import Limits, Mode, RunRequest, Task
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.speed_of_light import Peaks
from cluster_manager.core.task import load_task
from cluster_manager.harness import machine_peaks, runner
from tests.conftest import CORRECT, write_task

# 4 bytes read and 4 written per value; one "FLOP" per value, to have a rate to show.
SPEED = {"bytes": "2 * size * 4", "flops": "size", "precision": "fp32"}
TINY = Peaks(memory_gbs=1e-6, tflops={"fp32": 1e-9})  # every real kernel is over 100 %


@pytest.fixture
def task(tmp_path: Path) -> Task:
    folder = write_task(
        tmp_path / "copy",
        tests=[{"size": 8, "seed": 1}],
        benchmarks=[{"size": 256, "seed": 3}, {"size": 4096, "seed": 4}],
        extra={"speed_of_light": SPEED},
    )
    return load_task(folder)


@pytest.fixture
def peaks_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "peaks"
    monkeypatch.setenv(machine_peaks.CACHE_ENV, str(cache))
    return cache


def run(task: Task, mode: Mode, peaks: Peaks | None = None) -> RunResult:
    request = RunRequest.of_submission(
        task, CORRECT, mode, Limits(memory_bytes=8 << 30), 12345, peaks=peaks
    )
    return runner.run(request)


def test_a_cpu_run_is_measured_against_this_machines_peaks_measured_once(
    task: Task, peaks_cache: Path, monkeypatch: pytest.MonkeyPatch
):
    result = run(task, Mode.BENCHMARK)
    assert result.passed, result.message
    speeds = [b.speed for b in result.benchmarks]
    assert all(s is not None for s in speeds), result.benchmarks
    for bench, speed in zip(result.benchmarks, speeds, strict=True):
        assert speed is not None and speed.measured_peaks
        size = 256 if bench.index == 0 else 4096
        assert speed.bytes == 8 * size and speed.flops == size
        assert speed.bandwidth_gbs == pytest.approx(8 * size / bench.mean)  # bytes/ns = GB/s
        assert speed.peak_gbs and speed.peak_gbs > 0 and speed.fraction is not None
    assert result.review == ""  # measured peaks never hold a score
    (cached,) = peaks_cache.iterdir()
    assert json.loads(cached.read_text())["measured"] is True

    def measure_again() -> Peaks:
        raise AssertionError("measured again: the cache was not read")

    monkeypatch.setattr(machine_peaks, "measure", measure_again)
    again = run(task, Mode.BENCHMARK)
    first, before = again.benchmarks[0].speed, speeds[0]
    assert first is not None and before is not None and first.peak_gbs == before.peak_gbs


def test_a_ranked_case_over_a_published_peak_is_held_for_review(task: Task, peaks_cache: Path):
    result = run(task, Mode.LEADERBOARD, TINY)
    assert result.passed and result.score is not None, result.message
    assert result.review.startswith("held for review: benchmark 0 ran at "), result.review
    assert "of the GPU's peak" in result.review
    assert "faster than physically possible" in result.review
    speed = result.benchmarks[0].speed
    assert speed is not None and not speed.measured_peaks
    assert (speed.fraction or 0) > 1
    assert not peaks_cache.exists()  # the request's peaks: nothing measured


def test_a_benchmark_run_shows_the_figures_without_holding_anything(task: Task):
    result = run(task, Mode.BENCHMARK, TINY)
    assert result.passed and result.review == ""
    assert all(b.speed is not None and b.speed.fraction for b in result.benchmarks)


def test_a_task_without_formulas_gets_no_figures_and_measures_nothing(
    task: Task, peaks_cache: Path
):
    plain = dataclasses.replace(task, speed_of_light=None)
    result = run(plain, Mode.BENCHMARK)
    assert result.passed and all(b.speed is None for b in result.benchmarks)
    assert not peaks_cache.exists()


def test_the_measurement_is_cheap_cached_and_keyed_by_the_machine(peaks_cache: Path):
    system = {"cpu": "Test CPU 9000"}
    began = time.monotonic()
    measured = machine_peaks.cpu_peaks(system)
    took = time.monotonic() - began
    assert measured.measured and measured.memory_gbs and measured.memory_gbs > 0
    assert set(measured.tflops) == {"fp32", "fp64"} and min(measured.tflops.values()) > 0
    # Under 2 s on a quiet machine; the suite's machine is shared, so allow it a margin.
    assert took < 10, took
    began = time.monotonic()
    assert machine_peaks.cpu_peaks(system) == measured
    assert time.monotonic() - began < 0.1
    other = machine_peaks.machine_key({"cpu": "Another CPU"})
    assert other != machine_peaks.machine_key(system)
    assert [p.name for p in peaks_cache.iterdir()] == [
        f"cpu-{machine_peaks.machine_key(system)}.json"
    ]


def test_a_broken_cache_is_measured_again(peaks_cache: Path):
    system = {"cpu": "Test CPU"}
    peaks_cache.mkdir()
    path = peaks_cache / f"cpu-{machine_peaks.machine_key(system)}.json"
    path.write_text("{not json")
    assert machine_peaks.cpu_peaks(system).memory_gbs
    assert json.loads(path.read_text())["memory_gbs"] > 0
