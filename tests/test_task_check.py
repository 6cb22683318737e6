"""`cluster-manager leaderboard check`: each task of a folder, zip or competition file loads, and
its reference passes as the submission here; a task needing a GPU this machine lacks says which."""

from __future__ import annotations

import json
import subprocess
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest

from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.guarantees import (
    BUILT_IN_GUARANTEES,
    FRESH_INPUTS,
    fresh_inputs_problem,
    generator_takes_seed,
    guarantees,
)
from cluster_manager.core.models import ScriptMode, Verdict
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from cluster_manager.core.run_results import TestOutcome as CaseOutcome
from cluster_manager.core.sync_plan import ProblemSpec
from cluster_manager.core.task import load_task
from cluster_manager.service import Service
from cluster_manager.service.task_check import first_error, gpu_missing
from tests.conftest import EXAMPLES, FIXTURES, IDENTITY_REFERENCE, write_task
from tests.support.cli import NOT_INHERITED, environment, run_cli
from tests.support.fast_task import FAST_TASK

COMPAT = FIXTURES / "compat"


def check(*args: str, gpus_file: Path | None = None) -> subprocess.CompletedProcess[str]:
    ours = {} if gpus_file is None else {"CLUSTER_MANAGER_GPUS": str(gpus_file)}
    env = environment(ours, unset=(*NOT_INHERITED, "CLUSTER_MANAGER_GPUS"))
    return run_cli("leaderboard", "check", *args, env=env, timeout=600)


def rows(done: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(done.stdout)}


def cpu_with_devices(tmp_path: Path, devices: int) -> Path:
    """A GPU registry whose CPU type has `devices` devices (cores), whatever this machine has."""
    registry = tmp_path / f"cpu-{devices}.yml"
    registry.write_text(f"gpus:\n  CPU: {{launcher: local, devices: {devices}}}\n")
    return registry


def test_every_public_shape_loads_and_its_reference_passes_through_the_runner():
    done = check(str(COMPAT / "compat.yaml"), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    checks = rows(done)
    assert list(checks) == ["cases", "outputs", "cuda_only"]  # the file's order
    # Booleans, lists and underscored words read by the task's own eval.py, which (with its
    # utils.py) comes from a sibling problem set.
    assert checks["cases"]["passed"] is True and checks["cases"]["benchmark_s"] > 0
    # A NamedTuple holding a torch.return_types value and a dataclass, as the check expects.
    assert checks["outputs"]["passed"] is True and checks["outputs"]["benchmark_s"] > 0
    # Inputs on a CUDA device: not a failure here, but what it needs and why.
    cuda = checks["cuda_only"]
    assert cuda["ok"] and cuda["loaded"] and cuda["passed"] is None
    assert cuda["needs"] == "B200 or H100"
    assert "CUDA" in cuda["error"]


def test_broken_problems_fail_the_check_with_their_first_error_in_full():
    done = check(str(COMPAT / "broken.yaml"))
    assert done.returncode == 1, done.stdout + done.stderr
    table = done.stdout.splitlines()
    assert table[0].split() == ["task", "loads", "runs", "here", "reference", "benchmark"]
    assert table[2].split()[:4] == ["wrong", "yes", "yes", "FAILS"]
    assert table[3].split()[:2] == ["missing", "NO"]
    # The whole message of the check, every line of it, not just the first.
    assert "  test 0 (size: 3; seed: 1): mismatch at size 3:\n" in done.stdout
    assert "  expected [3.0, 4.0, 5.0]\n  got [2.0, 3.0, 4.0]\n" in done.stdout
    assert "files[1].source: file 'reference.py' does not exist" in done.stdout
    assert "0 of 2 tasks fine (1 ran here)" in done.stdout


def test_a_multi_gpu_task_needs_the_devices_a_machine_lacks(tmp_path: Path):
    """Where it has them, it passes: the shipped examples' check runs it on two devices."""
    task = EXAMPLES / "allreduce_py"  # world_size 2
    done = check(str(task), "--json", gpus_file=cpu_with_devices(tmp_path, 1))
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = rows(done).values()
    # The GPU type comes from the problem set's competition file that lists this folder.
    assert row["needs"] == "CPU with 2 devices" and row["passed"] is None
    assert row["error"] == "its largest world_size is 2; CPU here has 1"


def test_every_shipped_example_passes_and_the_cuda_one_says_what_it_needs(tmp_path: Path):
    # Two devices whatever the cores: the multi-GPU example runs (world_size 2) and passes.
    done = check(str(EXAMPLES / "examples.yaml"), "--json", gpus_file=cpu_with_devices(tmp_path, 2))
    assert done.returncode == 0, done.stdout + done.stderr
    checks = rows(done)
    for name in ("identity", "vectoradd", "softmax", "allreduce"):
        row = checks[name]
        assert row["passed"] is True and row["needs"] == "" and row["benchmark_s"] > 0, row
        # Timed by the built-in harness, which names what its ranked timings rely on.
        assert row["harness"] == "the built-in harness", row
        assert not row["problem"] and not row["caveat"], row
        assert row["guarantees"] == list(BUILT_IN_GUARANTEES), row
    assert checks["vectoradd_cuda"]["needs"] == "B200, and a solution"


def test_each_task_shows_its_phases_and_how_it_ended_as_it_goes():
    done = check(str(EXAMPLES / "identity_py"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[:3] == [
        "… [1/1] identity_py",
        "…   identity_py: test: 3 cases",
        "…   identity_py: benchmark: 2 cases",
    ], lines
    assert lines[3].startswith("✅ identity_py (") and lines[3].endswith(" s)"), lines


def test_a_gpu_type_run_elsewhere_or_unknown_is_refused():
    done = check(str(COMPAT / "compat.yaml"), "--gpu", "B200")
    assert done.returncode == 2
    assert "B200 runs on the github launcher" in done.stderr
    done = check(str(COMPAT / "compat.yaml"), "--gpu", "NOPE")
    assert done.returncode == 2 and "unknown GPU type 'NOPE'" in done.stderr


def test_a_broken_competition_file_is_refused_naming_the_problem_and_key(tmp_path: Path):
    bad = tmp_path / "set.yaml"
    bad.write_text("problems:\n  - directory: ../elsewhere\n")
    done = check(str(bad))
    assert done.returncode == 2
    assert "invalid competition file: set.yaml: problems[0].directory" in done.stderr


def _failed(stderr: str, error: str = "") -> RunResult:
    phase = PhaseOutcome(
        name="test",
        exit_code=1,
        timed_out=False,
        duration_s=1.0,
        stdout="",
        stderr=stderr,
        verdict=Verdict.RUNTIME_ERROR,
        message="test: the harness exited with code 1",
        tests=(CaseOutcome(0, "size: 1", passed=False, error=error),),
    )
    return RunResult(False, Verdict.RUNTIME_ERROR, ScriptMode.SCRIPT, "", phases=(phase,))


def test_only_a_missing_gpu_or_gpu_package_means_needs_a_gpu():
    traceback = 'Traceback (most recent call last):\n  File "eval.py", line 3\n    import {}\n'
    gpu_stack = traceback.format("cutlass") + "ModuleNotFoundError: No module named 'cutlass'\n"
    assert gpu_missing(_failed(gpu_stack)) == "ModuleNotFoundError: No module named 'cutlass'"
    typo = traceback.format("nmupy") + "ModuleNotFoundError: No module named 'nmupy'\n"
    assert gpu_missing(_failed(typo)) == ""
    # A traceback quoting code that mentions CUDA is not the error saying CUDA is missing.
    quoted = (
        '  File "r.py", line 9\n    raise AssertionError("Torch not compiled with CUDA enabled")\n'
    )
    assert gpu_missing(_failed(quoted + "ValueError: bad size\n")) == ""
    assert gpu_missing(_failed(quoted + "AssertionError: Torch not compiled with CUDA enabled"))


def test_first_error_is_a_failed_cases_message_else_the_last_traceback_whole():
    told = _failed("noise", error="mismatch:\nline two")
    assert first_error(told) == "test 0 (size: 1): mismatch:\nline two"
    stderr = "warming up\nTraceback (most recent call last):\n  File x\nKeyError: 'k'\n"
    untold = _failed(stderr, error="no result reported for this test")
    assert first_error(untold) == "Traceback (most recent call last):\n  File x\nKeyError: 'k'"


def _zip(folder: Path, to: Path) -> Path:
    with zipfile.ZipFile(to, "w") as archive:
        for file in sorted(folder.iterdir()):
            archive.write(file, file.name)
    return to


def test_a_zip_is_checked_and_keeps_its_own_bound(tmp_path: Path):
    done = check(str(_zip(FAST_TASK, tmp_path / "fast.zip")), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert rows(done)["fast"]["passed"] is True
    # A zip holds everything it names: a source from a sibling folder is refused at load.
    done = check(str(_zip(COMPAT / "set_a" / "cases_py", tmp_path / "cases.zip")), "--json")
    assert done.returncode == 1
    row = rows(done)["cases"]
    assert not row["loaded"] and "files[2].source" in row["error"], row


# --- which guarantees a task's ranked timings get -----------------------------------------

SEEDLESS_REFERENCE = IDENTITY_REFERENCE.replace(
    "def generate_input(size, seed):\n    gen = torch.Generator().manual_seed(seed)",
    "def generate_input(size):\n    gen = torch.Generator().manual_seed(size)",
)


def _seedless(tmp_path: Path, reference: str = SEEDLESS_REFERENCE) -> Path:
    return write_task(
        tmp_path / "seedless",
        reference=reference,
        tests=[{"size": 8}],
        benchmarks=[{"size": 256}, {"size": 512}],
    )


def test_a_task_main_says_the_builtin_harness_guarantees_do_not_hold():
    """The built-in harness's guarantees, named, are asserted on the shipped examples' check."""
    # A problem set's own eval.py imports the submission next to the secret seed.
    done = check(str(COMPAT / "set_a" / "cases_py"))
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "cases_py: timed by its own harness (eval.py):" in said
    assert "it imports the submission into the process that holds POPCORN_SEED and times it" in said
    assert "only the sandbox bounds the submission" in said


def test_a_cuda_task_is_timed_inside_the_submissions_process():
    told = guarantees(load_task(EXAMPLES / "vectoradd_cu"))
    assert told.holds == () and "eval.cu" in told.harness and "POPCORN_SEED" in told.caveat
    assert not told.problem


def test_a_task_whose_timed_iterations_cannot_get_fresh_inputs_fails_the_check(tmp_path: Path):
    done = check(str(_seedless(tmp_path)))
    assert done.returncode == 1, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "PROBLEM: benchmarks[0], benchmarks[1] have no seed and reference.py's" in said
    assert FRESH_INPUTS not in done.stdout  # every other guarantee is listed, not this one
    assert "0 of 1 tasks fine (1 ran here)" in done.stdout


def test_a_generator_takes_a_seed_by_name_or_through_kwargs_read_without_running_it(
    tmp_path: Path,
):
    def takes(signature: str, body: str = "") -> bool | None:
        reference = SEEDLESS_REFERENCE.replace("def generate_input(size):", signature)
        task = load_task(_seedless(tmp_path, body + reference))
        return generator_takes_seed(task)

    assert takes("def generate_input(size):") is False
    assert takes("def generate_input(size, *, seed=0):") is True
    assert takes("def generate_input(size, **kwargs):") is True
    # Bound some other way: its signature is not in the file, so the run decides.
    assert takes("def _made(size):", "from maker import generate_input\n") is None
    assert takes("@wrap\ndef generate_input(size):", "def wrap(f):\n    return f\n") is None
    assert fresh_inputs_problem(load_task(_seedless(tmp_path))).startswith("benchmarks[0]")
    # Seeds in every benchmark, or a task with its own main: nothing to supply.
    assert not fresh_inputs_problem(load_task(write_task(tmp_path / "seeded")))


async def test_create_and_sync_refuse_a_task_that_cannot_get_fresh_inputs(
    tmp_path: Path, service: Service, clock
):
    task = load_task(_seedless(tmp_path))
    deadline = clock() + timedelta(days=1)
    with pytest.raises(
        InvalidTaskError, match=r"benchmarks: benchmarks\[0\], benchmarks\[1\] have no seed"
    ):
        await service.leaderboards.create("seedless", task, deadline, ["CPU"])
    spec = ProblemSpec("seedless", task, deadline, ("CPU",))
    with pytest.raises(InvalidTaskError, match="give each benchmark a seed"):
        await service.problem_sets.sync([(spec, ())])
    assert await service.leaderboards.all(include_closed=True) == []
    fine = load_task(write_task(tmp_path / "seeded"))
    await service.leaderboards.create("seeded", fine, deadline, ["CPU"])
    changed = ProblemSpec("seeded", task, deadline, ("CPU",))
    with pytest.raises(InvalidTaskError, match="give each benchmark a seed"):
        await service.problem_sets.sync([(changed, ())], force=True)
