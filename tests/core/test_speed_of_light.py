"""Speed of light: a task's formulas read and checked at load, a GPU type's peaks, and the
figures of a timed case (achieved rates, fraction of peak, the floor and its review)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.gpus import InvalidRegistryError, load_registry, parse_registry
from cluster_manager.core.models import Language, Limits, Mode, RankingBy, RunRequest, Task, Verdict
from cluster_manager.core.run_results import BenchmarkOutcome, PhaseOutcome, RunResult
from cluster_manager.core.scoring import share_of_peak
from cluster_manager.core.speed_of_light import (
    CaseSpeed,
    Peaks,
    SpeedOfLight,
    case_speed,
    floor_ns,
    speed_review,
)
from cluster_manager.core.sync_plan import task_changes
from cluster_manager.core.task import load_task
from cluster_manager.core.task_folder import folder_files
from cluster_manager.core.task_sources import TASK_YAML
from tests.conftest import EXAMPLES, write_task

SPEC = {"bytes": "3 * size * size * 2", "flops": "size * size", "precision": "fp16"}
H100 = Peaks(3350.0, {"fp16": 989.4, "fp32": 67.0})


def task_with(tmp_path: Path, speed_of_light: object, **more: object) -> Path:
    return write_task(
        tmp_path / "task",
        benchmarks=[{"size": 256, "seed": 3}, {"size": 1024, "seed": 4}],
        extra={"speed_of_light": speed_of_light, **more},
    )


def test_a_task_states_its_formulas_and_they_survive_every_form(tmp_path: Path):
    task = load_task(task_with(tmp_path, SPEC))
    assert task.speed_of_light == SpeedOfLight(**SPEC)
    assert Task.from_json(task.to_json()) == task
    assert Task.from_json(task.to_stored_json()).speed_of_light == task.speed_of_light
    # Written back as a folder (`leaderboard task --out`, the API's zips), read again.
    out = tmp_path / "out"
    out.mkdir()
    for name, text in folder_files(task).items():
        (out / name).write_text(text)
    assert load_task(out).speed_of_light == task.speed_of_light


def test_a_change_of_the_formulas_is_a_change_that_keeps_the_scores(tmp_path: Path):
    old = load_task(task_with(tmp_path / "a", SPEC))
    new = load_task(task_with(tmp_path / "b", {**SPEC, "bytes": "4 * size * size * 2"}))
    (change,) = [c for c in task_changes(old, new) if c.what == "speed of light"]
    assert not change.invalidates_scores


def test_every_shipped_single_gpu_example_states_its_speed_of_light():
    for name in ("identity_py", "vectoradd_py", "softmax_py", "vectoradd_cu"):
        task = load_task(EXAMPLES / name)
        assert task.speed_of_light is not None and task.speed_of_light.bytes, name
    # Its bound is the interconnect, which no registry states: no memory floor to claim.
    assert load_task(EXAMPLES / "allreduce_py").speed_of_light is None


@pytest.mark.parametrize(
    ("speed_of_light", "key", "reason"),
    [
        ({"bytes": "n * 4"}, "speed_of_light.bytes (benchmarks[0])", "unknown name 'n'"),
        ({"bytes": "seed * 10000 - size * 100"}, "speed_of_light.bytes (benchmarks[1])", "< 0"),
        ({"bytes": "size / (seed - 3)"}, "speed_of_light.bytes (benchmarks[0])", "division"),
        ({"bytes": "__import__('os')"}, "speed_of_light.bytes", "calls allowed are min"),
        ({"flops": "size ** 3"}, "speed_of_light.precision", "needed with flops"),
        ({"flops": "size", "precision": "fp4"}, "speed_of_light.precision", "one of fp64"),
        ({"bytes": "size", "time": 3}, "speed_of_light.time", "unknown key"),
        ({"precision": "fp16"}, "speed_of_light", "neither bytes nor flops"),
        ("3 * size", "speed_of_light", "must map bytes, flops and precision"),
        ({"bytes": ["size"]}, "speed_of_light.bytes", "must be a formula"),
    ],
)
def test_a_bad_speed_of_light_is_a_task_error_naming_the_file_and_key(
    tmp_path: Path, speed_of_light: object, key: str, reason: str
):
    with pytest.raises(InvalidTaskError) as caught:
        load_task(task_with(tmp_path, speed_of_light))
    assert (caught.value.file, caught.value.key) == (TASK_YAML, key)
    assert reason in caught.value.reason, caught.value.reason


def test_a_word_where_a_formula_needs_a_number_names_the_case(tmp_path: Path):
    folder = write_task(
        tmp_path / "task",
        benchmarks=[{"size": 256, "seed": 3}, {"size": "large", "seed": 4}],
        extra={"speed_of_light": {"bytes": "size * 8"}},
    )
    with pytest.raises(InvalidTaskError, match=r"benchmarks\[1\]\): 'size' is 'large'"):
        load_task(folder)


def test_the_figures_of_a_case():
    spec = SpeedOfLight(**SPEC)
    # 6 MiB and 1 MFLOP in 3 µs: 2.1 TB/s (63 % of 3.35 TB/s), 0.35 TFLOP/s.
    speed = case_speed(spec, {"size": 1024}, 3000.0, H100)
    assert speed is not None
    assert speed.bytes == 6 * 2**20 and speed.flops == 2**20
    assert speed.bandwidth_gbs == pytest.approx(6 * 2**20 / 3e-6 / 1e9)
    assert speed.tflops == pytest.approx(2**20 / 3e-6 / 1e12)
    assert speed.memory_share == pytest.approx(speed.bandwidth_gbs / 3350)
    assert speed.compute_share == pytest.approx(speed.tflops / 989.4)
    assert speed.fraction == speed.memory_share and speed.bound == "memory"
    # The floor is the time at which the fraction is one.
    floor = floor_ns(spec, {"size": 1024}, H100)
    assert floor == pytest.approx(3000.0 * speed.fraction)
    assert CaseSpeed.from_json(speed.to_json()) == speed
    assert speed.to_json()["fraction_of_peak"] == speed.fraction


def test_a_compute_bound_case_and_a_gpu_without_that_precision():
    spec = SpeedOfLight("2 * n * n * 2", "2 * n ** 3", "fp16")
    speed = case_speed(spec, {"n": 4096}, 200_000.0, H100)
    assert speed is not None and speed.bound == "compute"
    assert speed.fraction == pytest.approx(2 * 4096**3 / 200e-6 / 1e12 / 989.4)
    no_fp16 = Peaks(320.0, {"fp32": 8.1})
    only_memory = case_speed(spec, {"n": 4096}, 200_000.0, no_fp16)
    assert only_memory is not None and only_memory.compute_share is None
    assert only_memory.bound == "memory"
    unknown = case_speed(spec, {"n": 4096}, 200_000.0, None)
    assert unknown is not None and unknown.fraction is None and unknown.bound == ""
    assert unknown.tflops > 0  # achieved rates need no peaks


def test_no_figures_without_formulas_or_a_mean():
    assert case_speed(None, {"size": 1}, 10.0, H100) is None
    assert case_speed(SpeedOfLight("size"), {"size": 1}, 0.0, H100) is None
    assert case_speed(SpeedOfLight("n"), {"size": 1}, 10.0, H100) is None  # stored task, changed


def test_over_100_percent_of_a_published_peak_is_held_for_review():
    spec = SpeedOfLight(**SPEC)
    floor = floor_ns(spec, {"size": 1024}, H100)
    honest = case_speed(spec, {"size": 1024}, floor * 1.01, H100)
    shortcut = case_speed(spec, {"size": 1024}, floor * 0.5, H100)
    assert honest is not None and shortcut is not None
    assert speed_review({0: honest, 1: honest}) == ""
    review = speed_review({0: honest, 1: shortcut})
    assert review.startswith("held for review: benchmark 1 ran at 200% of the GPU's peak")
    assert "memory bandwidth (6700 GB/s of 3350)" in review
    # A CPU's measured peaks inform; its caches beat them honestly.
    measured = Peaks(3350.0, {"fp16": 989.4}, measured=True)
    fast_cpu = case_speed(spec, {"size": 1024}, floor * 0.5, measured)
    assert fast_cpu is not None and fast_cpu.fraction == pytest.approx(2.0)
    assert speed_review({0: fast_cpu}) == ""


def test_a_scores_share_of_peak_follows_the_ranking_rule():
    spec = SpeedOfLight("size * 1e6")  # 1 µs per size unit at 1000 GB/s
    peaks = Peaks(1000.0)
    cases = ({"size": 1}, {"size": 4})
    base = Task("t", Language.PYTHON, (), (), cases)
    for rule, score_s, share in (
        (RankingBy.LAST, 8e-6, 0.5),  # the last case: 4 µs floor in 8 µs
        (RankingBy.MEAN, 5e-6, 0.5),  # (1 + 4) / 2 = 2.5 µs in 5 µs
        (RankingBy.GEOM, 4e-6, 0.5),  # sqrt(1 * 4) = 2 µs in 4 µs
    ):
        task = Task(**{**vars(base), "ranking_by": rule, "speed_of_light": spec})
        assert share_of_peak(task, peaks, score_s) == pytest.approx(share), rule
    assert share_of_peak(base, peaks, 1e-6) is None  # no formulas
    assert share_of_peak(Task(**{**vars(base), "speed_of_light": spec}), None, 1e-6) is None


def test_the_shipped_registry_states_published_peaks_for_every_gpu_but_the_cpu():
    registry = load_registry()
    for name in ("B200", "H100", "A100", "L4", "T4", "MI300X", "MI250"):
        peaks = registry.get(name).peaks
        assert peaks is not None and peaks.memory_gbs and peaks.tflops["fp32"] > 0, name
        assert not peaks.measured
        assert "peaks" not in registry.get(name).params  # not a launcher parameter
    assert registry.get("H100").peaks == Peaks(
        3350.0,
        {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    )
    assert registry.get("CPU").peaks is None  # measured by the runner on its machine


@pytest.mark.parametrize(
    ("peaks", "reason"),
    [
        ("fast", "must map memory_gbs"),
        ({"memory_gbs": -1}, "positive number of GB/s"),
        ({"memory_gbs": True}, "positive number of GB/s"),
        ({"tflops": {"fp4": 10}}, "tflops.fp4: precisions are fp64"),
        ({"tflops": {"fp16": 0}}, "tflops.fp16"),
        ({"tflops": [1]}, "tflops must map precisions"),
        ({"bandwidth": 3}, "must map memory_gbs"),
    ],
)
def test_bad_peaks_are_a_registry_error_naming_the_key(peaks: object, reason: str):
    data = {"gpus": {"X": {"launcher": "local", "peaks": peaks}}}
    with pytest.raises(InvalidRegistryError, match=r"gpus\.X\.peaks: ") as caught:
        parse_registry(data)
    assert reason in str(caught.value)


def test_figures_travel_in_the_request_and_the_result():
    task = load_task(EXAMPLES / "vectoradd_py")
    request = RunRequest.of_submission(task, "x", Mode.BENCHMARK, Limits(), peaks=H100)
    assert RunRequest.from_json(request.to_json()).peaks == H100
    speed = case_speed(task.speed_of_light, task.benchmarks[0], 5000.0, H100)
    bench = BenchmarkOutcome(0, "size: 256", True, runs=10, mean=5000.0, speed=speed)
    phase = PhaseOutcome("benchmark", 0, False, 1.0, "", "", Verdict.PASSED, "", (), (bench,))
    result = RunResult(True, Verdict.PASSED, Mode.BENCHMARK, "", (phase,))
    assert RunResult.from_json(result.to_json()) == result
    # An older result, without figures, still reads.
    old = result.to_json()
    del old["phases"][0]["benchmarks"][0]["speed"]
    assert RunResult.from_json(old).benchmarks[0].speed is None
