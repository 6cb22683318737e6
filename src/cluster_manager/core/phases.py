"""Which phases a run has, and how long each may take: one timeout model, from the task."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cluster_manager.core.models import (
    Case,
    Language,
    Limits,
    Mode,
    RunMode,
    RunRequest,
    ScriptMode,
    Task,
    TaskFile,
)

# Start-up, materialising and reporting on top of the phases' own limits.
RUN_OVERHEAD_S = 60.0


@dataclass(frozen=True)
class Phase:
    mode: RunMode  # the popcorn mode passed to the task's main
    cases: tuple[Case, ...]
    secret: bool  # gets POPCORN_SEED


def plan_phases(request: RunRequest) -> list[Phase]:
    """Ranked and benchmark runs are checked on the tests first; a failure stops the run."""
    task = request.task
    tests = Phase(Mode.TEST, task.tests, secret=False)
    match request.mode:
        case Mode.TEST:
            return [tests]
        case Mode.BENCHMARK:
            return [tests, Phase(Mode.BENCHMARK, task.benchmarks, secret=False)]
        case Mode.LEADERBOARD:
            return [tests, Phase(Mode.LEADERBOARD, task.benchmarks, secret=True)]
        case Mode.PROFILE:
            return [Phase(Mode.PROFILE, task.benchmarks, secret=False)]
        case ScriptMode.SCRIPT:
            return [Phase(ScriptMode.SCRIPT, (), secret=False)]


def run_timeout(request: RunRequest) -> float:
    """The longest a whole run may take before a launcher gives up on it."""
    phases = plan_phases(request)
    total = sum(request.task.timeout_for(p.mode) + request.limits.grace for p in phases)
    if request.task.lang is Language.CUDA:
        total += request.limits.compile_timeout
    return total + RUN_OVERHEAD_S


def longest_run_s(task: Task, limits: Limits) -> float:
    """The longest any run of the task may take, over the modes a submission may ask for."""
    return max(run_timeout(RunRequest.of_submission(task, "", mode, limits)) for mode in Mode)


def script_task(file_name: str, timeout_s: float) -> Task:
    """A task that only runs one Python file as-is (`ScriptMode.SCRIPT`), within `timeout_s`."""
    return Task(
        name="script",
        lang=Language.PYTHON,
        files=(TaskFile(file_name, None),),
        tests=({"script": 1},),
        benchmarks=({"script": 1},),
        test_timeout=timeout_s,
    )


def only_benchmark(task: Task, index: int | None) -> Task:
    """The task with one of its benchmark cases: what a profile of that case runs (the whole
    task when no case was chosen)."""
    if index is None:
        return task
    floors = task.floors_us[index : index + 1] if task.floors_us else ()
    return dataclasses.replace(task, benchmarks=(task.benchmarks[index],), floors_us=floors)
