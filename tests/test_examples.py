"""Every example task, run through the real runner: right submissions pass, wrong ones get
their verdict. These are the tasks `make demo` shows."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from cluster_manager.core.models import Language, Mode, Task, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.harness import runner
from tests.conftest import EXAMPLES, FIXTURES, make_request

PYTHON_EXAMPLES = ["identity_py", "vectoradd_py", "softmax_py", "allreduce_py"]


def run_file(task: Task, path: Path, mode: Mode = Mode.TEST, **kwargs) -> RunResult:
    return runner.run(make_request(task, path.read_text(), mode, **kwargs))


@pytest.fixture(scope="module", params=PYTHON_EXAMPLES)
def example(request) -> tuple[Path, Task]:
    folder = EXAMPLES / request.param
    return folder, load_task(folder)


def test_every_example_loads_with_a_template_and_a_description():
    for folder in sorted(p.parent for p in EXAMPLES.glob("*/task.yml")):
        task = load_task(folder)
        assert task.templates, folder.name
        assert task.description.strip(), folder.name
        assert (folder / "wrong").is_dir(), folder.name


def test_correct_submission_passes(example):
    folder, task = example
    result = run_file(task, folder / "submission.py")
    assert result.passed, result.message
    assert len(result.tests) == len(task.tests)


def test_template_passes(example):
    folder, task = example
    result = run_file(task, folder / "template.py")
    assert result.passed, result.message


def test_wrong_answer_is_caught(example):
    folder, task = example
    result = run_file(task, folder / "wrong" / "wrong_answer.py")
    assert result.verdict is Verdict.WRONG_ANSWER, result.message
    assert any(not t.passed and t.error for t in result.tests)


def test_crash_is_a_runtime_error(example):
    folder, task = example
    result = run_file(task, folder / "wrong" / "crash.py")
    assert result.verdict is Verdict.RUNTIME_ERROR, result.message


def test_kernel_that_never_returns_times_out(example):
    folder, task = example
    # The task's own limit is tens of seconds; the mechanism is the same at 5 s.
    task = dataclasses.replace(task, test_timeout=5.0)
    result = run_file(task, folder / "wrong" / "timeout.py")
    assert result.verdict is Verdict.TIMEOUT, result.message
    assert result.phases[0].duration_s < 5 + 5


@pytest.mark.parametrize("name", ["softmax_py", "allreduce_py"])
def test_ranked_run_of_heavier_and_multi_gpu_examples(name):
    task = load_task(EXAMPLES / name)
    result = run_file(task, EXAMPLES / name / "submission.py", Mode.LEADERBOARD, seed=123)
    assert result.passed, result.message
    assert result.score is not None and result.score > 0
    assert len(result.phases[-1].benchmarks) == len(task.benchmarks)


def test_multi_gpu_example_runs_two_ranks():
    task = load_task(EXAMPLES / "allreduce_py")
    assert task.multi_gpu and all(c["world_size"] == 2 for c in task.tests)


# --- a public-style problem set with its own eval.py, reached through ../ ---------------------

PROBLEMSET = FIXTURES / "problemset" / "vectorsum_py"


@pytest.mark.parametrize("mode", [Mode.TEST, Mode.BENCHMARK, Mode.LEADERBOARD])
def test_task_with_its_own_harness_runs_unchanged(mode):
    task = load_task(PROBLEMSET)
    assert task.main == "eval.py"
    assert any(f.name == "eval.py" and f.content for f in task.files)
    result = run_file(task, PROBLEMSET / "submission.py", mode, seed=77)
    assert result.passed, result.message
    if mode is Mode.LEADERBOARD:
        assert result.score is not None and result.score > 0


def test_task_with_its_own_harness_reports_wrong_answers():
    task = load_task(PROBLEMSET)
    result = run_file(task, PROBLEMSET / "wrong_answer.py")
    assert result.verdict is Verdict.WRONG_ANSWER
    assert result.tests and not result.tests[0].passed


# --- CUDA: compiled with nvcc here; nothing can run it without a GPU --------------------------

CUDA = EXAMPLES / "vectoradd_cu"


def _require_nvcc() -> None:
    if shutil.which("nvcc") is None:
        if os.environ.get("CI"):
            pytest.fail("nvcc is required in CI")
        pytest.skip("nvcc is not installed")


def test_cuda_example_compiles_with_nvcc():
    _require_nvcc()
    task = load_task(CUDA)
    assert task.lang is Language.CUDA
    result = run_file(task, CUDA / "submission.cu")
    assert result.compilation is not None
    assert result.compilation.success, result.compilation.output
    assert result.compilation.command[0] == "nvcc"
    assert "-O3" in result.compilation.command
    if shutil.which("nvidia-smi") is None:
        # No device: one line says what the task needs; not the submission's fault.
        assert result.verdict is Verdict.INTERNAL_ERROR, result.message
        assert "vectoradd_cu is CUDA code and needs a GPU; this machine has none" in result.message
        assert result.phases == ()
    else:
        assert result.passed, result.message


def test_cuda_compile_error_comes_back_readable():
    _require_nvcc()
    task = load_task(CUDA)
    result = run_file(task, CUDA / "wrong" / "compile_error.cu")
    assert result.verdict is Verdict.COMPILE_ERROR
    assert result.compilation is not None and not result.compilation.success
    assert "submission.cu" in result.compilation.output
    assert "error" in result.compilation.output
    assert "error" in result.message
    assert result.phases == ()
