"""Data contracts: JSON round trips of requests and results, and the phase plan."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from cluster_manager.core.models import (
    RUN_REQUEST_VERSION,
    CudaConfig,
    Language,
    Limits,
    Mode,
    RankingBy,
    RunRequest,
    ScriptMode,
    Task,
    TaskFile,
    Verdict,
)
from cluster_manager.core.phases import RUN_OVERHEAD_S, Phase, plan_phases, run_timeout
from cluster_manager.core.run_results import (
    RUN_RESULT_VERSION,
    BenchmarkOutcome,
    CompileOutcome,
    PhaseOutcome,
    RunResult,
)
from cluster_manager.core.run_results import TestOutcome as CaseOutcome

TESTS = ({"size": 8, "seed": 1}, {"size": 33, "seed": 2, "dtype": "half"})
BENCHMARKS = ({"size": 1024, "seed": 3}, {"size": 4096, "seed": 4})


def py_task(**overrides: Any) -> Task:
    fields: dict[str, Any] = {
        "name": "vectorsum",
        "lang": Language.PYTHON,
        "files": (TaskFile("submission.py", None), TaskFile("eval.py", "print('hi')\n")),
        "tests": TESTS,
        "benchmarks": BENCHMARKS,
        "main": "eval.py",
        "templates": {"Python": "def custom_kernel(data): ...\n"},
        "test_timeout": 60.0,
        "benchmark_timeout": 120.0,
        "ranked_timeout": 150.0,
        "ranking_by": RankingBy.GEOM,
        "description": "Sum.\n",
    }
    fields.update(overrides)
    return Task(**fields)


def cu_task(**overrides: Any) -> Task:
    fields: dict[str, Any] = {
        "name": "vectoradd_cu",
        "lang": Language.CUDA,
        "files": (TaskFile("submission.cu", None), TaskFile("main.cu", "int main(){}\n")),
        "tests": TESTS,
        "benchmarks": BENCHMARKS,
        "cuda": CudaConfig(
            sources=("main.cu", "submission.cu"),
            include_dirs=("include",),
            defines={"N": "4"},
            compile_flags=("-O3",),
        ),
        "test_timeout": 30.0,
        "benchmark_timeout": 40.0,
        "ranked_timeout": 50.0,
    }
    fields.update(overrides)
    return Task(**fields)


def request(task: Task, mode: Mode, **overrides: Any) -> RunRequest:
    fields: dict[str, Any] = {
        "task": task,
        "submission_name": task.submission_name,
        "submission_code": "def custom_kernel(data):\n    return data\n",
        "mode": mode,
    }
    fields.update(overrides)
    return RunRequest(**fields)


def through_json(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data))


# --- Task -------------------------------------------------------------------------------------


def test_task_properties() -> None:
    task = py_task()
    assert task.submission_name == "submission.py"
    assert task.files[0].is_submission and not task.files[1].is_submission
    assert task.timeout_for("test") == 60.0
    assert task.timeout_for("benchmark") == 120.0
    assert task.timeout_for("profile") == 120.0
    assert task.timeout_for("leaderboard") == 150.0
    with pytest.raises(ValueError, match="no phase mode 'ranked'"):
        task.timeout_for("ranked")  # type: ignore[arg-type]


def test_task_json_is_plain_json() -> None:
    data = py_task().to_json()
    assert through_json(data) == data
    assert data["lang"] == "py"
    assert data["ranking_by"] == "geom"
    assert data["files"][0] == {"name": "submission.py", "content": None}
    assert data["tests"] == [dict(c) for c in TESTS]
    assert data["cuda"] is None


@pytest.mark.parametrize("task", [py_task(), cu_task(), py_task(multi_gpu=True, main=None)])
def test_task_round_trip(task: Task) -> None:
    again = Task.from_json(through_json(task.to_json()))
    assert again == task
    assert isinstance(again.files, tuple) and isinstance(again.tests, tuple)
    assert again.lang is task.lang
    assert again.ranking_by is task.ranking_by


def test_task_from_minimal_json_defaults() -> None:
    task = Task.from_json(
        {
            "name": "t",
            "lang": "cu",
            "files": [{"name": "s.cu", "content": None}],
            "tests": [{"n": 1}],
            "benchmarks": [{"n": 2}],
            "cuda": {"sources": ["s.cu"]},
        }
    )
    assert task.cuda == CudaConfig(sources=("s.cu",))
    assert task.main is None
    assert task.test_timeout == task.benchmark_timeout == task.ranked_timeout == 180.0
    assert task.ranking_by is RankingBy.LAST
    assert task.multi_gpu is False
    assert task.templates == {} and task.description == ""


# --- RunRequest -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(Mode))
def test_run_request_round_trip(mode: Mode) -> None:
    req = request(
        cu_task(),
        mode,
        secret_seed=2**64 - 1,
        limits=Limits(compile_timeout=90.0, output_bytes=1024, memory_bytes=8 << 30, grace=2.5),
        gpu_count=4,
    )
    data = through_json(req.to_json())
    assert data["version"] == RUN_REQUEST_VERSION
    assert data["mode"] == mode.value
    again = RunRequest.from_json(data)
    assert again == req
    assert again.mode is mode
    assert again.limits.memory_bytes == 8 << 30


def test_run_request_round_trip_defaults() -> None:
    req = request(py_task(), Mode.TEST)
    again = RunRequest.from_json(through_json(req.to_json()))
    assert again == req
    assert again.secret_seed is None
    assert again.limits == Limits()
    assert again.gpu_count == 1


@pytest.mark.reliability(
    "Bad input",
    "run request JSON without a version or with another one (None, 0, 2, '1')",
    "refused: ValueError 'unsupported run request version'",
)
@pytest.mark.parametrize("version", [None, 0, 2, "1"])
def test_run_request_wrong_version_is_refused(version: Any, record_property) -> None:
    data = request(py_task(), Mode.TEST).to_json()
    if version is None:
        del data["version"]
    else:
        data["version"] = version
    with pytest.raises(ValueError, match="unsupported run request version") as info:
        RunRequest.from_json(data)
    record_property("observed", str(info.value))


# --- RunResult --------------------------------------------------------------------------------


def full_result() -> RunResult:
    test_phase = PhaseOutcome(
        name="test",
        exit_code=0,
        timed_out=False,
        duration_s=1.25,
        stdout="out",
        stderr="warn\n",
        verdict=Verdict.PASSED,
        message="test: all 2 tests passed",
        tests=(
            CaseOutcome(0, "size: 8; seed: 1", True, "", "close enough"),
            CaseOutcome(1, "size: 33; seed: 2; dtype: half", True),
        ),
    )
    ranked_phase = PhaseOutcome(
        name="leaderboard",
        exit_code=None,
        timed_out=True,
        duration_s=150.0,
        stdout="",
        stderr="",
        verdict=Verdict.TIMEOUT,
        message="leaderboard: exceeded the time limit of 150 s",
        benchmarks=(
            BenchmarkOutcome(0, "size: 1024; seed: 3", True, 100, 1500.5, 2.0, 0.2, 1400.0, 1600),
            BenchmarkOutcome(1, "size: 4096; seed: 4", False, error="timeout", report="r"),
        ),
    )
    return RunResult(
        passed=False,
        verdict=Verdict.TIMEOUT,
        mode=Mode.LEADERBOARD,
        message="leaderboard: exceeded the time limit of 150 s",
        phases=(test_phase, ranked_phase),
        compilation=CompileOutcome(
            success=True, command=("nvcc", "-O3", "main.cu"), output="ok", duration_s=3.5
        ),
        score=None,
        system={"gpu": "H100", "gpus": ["H100", "H100"], "torch": "2.4"},
        durations={"compile": 3.5, "test": 1.25},
    )


def test_run_result_round_trip() -> None:
    result = full_result()
    data = through_json(result.to_json())
    assert data["version"] == RUN_RESULT_VERSION
    assert data["verdict"] == "timeout"
    assert data["compilation"]["command"] == ["nvcc", "-O3", "main.cu"]
    assert data["phases"][0]["tests"][0]["message"] == "close enough"
    again = RunResult.from_json(data)
    assert again == result
    assert again.verdict is Verdict.TIMEOUT
    assert again.phases[1].verdict is Verdict.TIMEOUT
    assert isinstance(again.compilation, CompileOutcome)
    assert isinstance(again.compilation.command, tuple)
    assert isinstance(again.phases[0].tests, tuple)


def test_run_result_round_trip_minimal() -> None:
    result = RunResult(passed=True, verdict=Verdict.PASSED, mode=Mode.TEST, message="ok")
    again = RunResult.from_json(through_json(result.to_json()))
    assert again == result
    assert again.compilation is None and again.phases == ()


def test_run_result_round_trip_with_score() -> None:
    result = RunResult(
        passed=True, verdict=Verdict.PASSED, mode=Mode.LEADERBOARD, message="", score=1.5e-6
    )
    assert RunResult.from_json(through_json(result.to_json())).score == 1.5e-6


def test_run_result_flattens_tests_and_benchmarks() -> None:
    result = full_result()
    assert [t.spec for t in result.tests] == ["size: 8; seed: 1", "size: 33; seed: 2; dtype: half"]
    assert [b.passed for b in result.benchmarks] == [True, False]


@pytest.mark.reliability(
    "Bad input",
    "run result JSON without a version or with another one (None, 0, 2, '1')",
    "refused: ValueError 'unsupported run result version'",
)
@pytest.mark.parametrize("version", [None, 0, 2, "1"])
def test_run_result_wrong_version_is_refused(version: Any, record_property) -> None:
    data = full_result().to_json()
    if version is None:
        del data["version"]
    else:
        data["version"] = version
    with pytest.raises(ValueError, match="unsupported run result version") as info:
        RunResult.from_json(data)
    record_property("observed", str(info.value))


@pytest.mark.reliability(
    "Bad input",
    "run result JSON with an unknown verdict ('great')",
    "refused with a ValueError, never read as a pass",
)
def test_run_result_unknown_verdict_is_refused(record_property) -> None:
    data = full_result().to_json()
    data["verdict"] = "great"
    with pytest.raises(ValueError) as info:
        RunResult.from_json(data)
    record_property("observed", str(info.value))


# --- plan -------------------------------------------------------------------------------------


def test_plan_test_mode() -> None:
    assert plan_phases(request(py_task(), Mode.TEST)) == [Phase("test", TESTS, secret=False)]


def test_plan_benchmark_mode() -> None:
    assert plan_phases(request(py_task(), Mode.BENCHMARK)) == [
        Phase("test", TESTS, secret=False),
        Phase("benchmark", BENCHMARKS, secret=False),
    ]


def test_plan_leaderboard_mode() -> None:
    phases = plan_phases(request(py_task(), Mode.LEADERBOARD, secret_seed=42))
    assert phases == [
        Phase("test", TESTS, secret=False),
        Phase("leaderboard", BENCHMARKS, secret=True),
    ]
    assert [p.secret for p in phases] == [False, True]


def test_plan_profile_mode() -> None:
    assert plan_phases(request(py_task(), Mode.PROFILE)) == [
        Phase("profile", BENCHMARKS, secret=False)
    ]


def test_every_mode_has_a_plan() -> None:
    for mode in Mode:
        phases = plan_phases(request(py_task(), mode))
        assert phases, mode
        # Every phase that speaks the popcorn protocol gets cases; a script runs as-is.
        assert all(p.cases for p in phases if p.mode != "script"), mode
    assert [p.mode for p in plan_phases(request(py_task(), ScriptMode.SCRIPT))] == ["script"]


@pytest.mark.parametrize(
    ("mode", "phase_total"),
    [
        (Mode.TEST, 60.0),
        (Mode.BENCHMARK, 60.0 + 120.0),
        (Mode.LEADERBOARD, 60.0 + 150.0),
        (Mode.PROFILE, 120.0),
    ],
)
def test_run_timeout_python(mode: Mode, phase_total: float) -> None:
    req = request(py_task(), mode, limits=Limits(compile_timeout=999.0))
    # No compile step for Python: compile_timeout is not added.
    assert run_timeout(req) == phase_total + RUN_OVERHEAD_S


@pytest.mark.parametrize(
    ("mode", "phase_total"),
    [
        (Mode.TEST, 30.0),
        (Mode.BENCHMARK, 30.0 + 40.0),
        (Mode.LEADERBOARD, 30.0 + 50.0),
        (Mode.PROFILE, 40.0),
    ],
)
def test_run_timeout_cuda_adds_compile(mode: Mode, phase_total: float) -> None:
    req = request(cu_task(), mode, limits=Limits(compile_timeout=90.0))
    assert run_timeout(req) == phase_total + 90.0 + RUN_OVERHEAD_S


def test_run_timeout_defaults() -> None:
    task = py_task(test_timeout=180.0, benchmark_timeout=180.0, ranked_timeout=180.0)
    assert RUN_OVERHEAD_S == 60.0
    assert run_timeout(request(task, Mode.LEADERBOARD)) == 180.0 * 2 + 60.0


def test_run_timeout_covers_phase_grace() -> None:
    req = request(py_task(), Mode.LEADERBOARD, limits=Limits(grace=60.0))
    # The runner lets each phase run for its timeout + grace before killing it.
    longest_phases = sum(req.task.timeout_for(p.mode) + req.limits.grace for p in plan_phases(req))
    assert run_timeout(req) >= longest_phases


def test_a_multi_gpu_submission_asks_for_a_device_per_rank() -> None:
    ranks = dataclasses.replace(
        py_task(), multi_gpu=True, tests=({"world_size": 2},), benchmarks=({"world_size": 4},)
    )
    assert RunRequest.of_submission(ranks, "", Mode.TEST, Limits()).gpu_count == 4
    assert RunRequest.of_submission(py_task(), "", Mode.TEST, Limits()).gpu_count == 1
