"""`leaderboard check`: what an organiser runs before publishing a task. Each task is loaded,
then its reference runs as the submission in benchmark mode (its test phase, then its
benchmarks, each timed for half a second) on this machine.

A task this machine cannot run (its harness needs CUDA or a GPU stack's packages, or more
devices than the machine has) is not a failure: its row says what it needs. Each task also says
which guarantees its ranked timings get (`core.guarantees`); one whose timed iterations cannot
get fresh inputs fails the check, as `leaderboard create` refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from cluster_manager.core import protocol, scoring
from cluster_manager.core.competition import is_competition_file, load_competition
from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.guarantees import REFERENCE_FILE, guarantees
from cluster_manager.core.models import Language, Limits, Mode, RunRequest, Task
from cluster_manager.core.run_results import BenchmarkOutcome, PhaseOutcome, RunResult, TestOutcome
from cluster_manager.core.task import load_task
from cluster_manager.core.task_sources import problem_set_root

RunFn = Callable[[RunRequest], RunResult]

# How long the check times each benchmark case of the reference (a ranked run: up to 3 s).
CHECK_CASE_S = 0.5

# What a run prints when the machine lacks the GPU its harness asks for: PyTorch without
# CUDA/ROCm, no driver, no device, distributed backends that need one, a harness's own check.
_NO_GPU = re.compile(
    r"Torch not compiled with CUDA enabled"
    r"|Cannot get CUDA generator without ATen_cuda"
    r"|accelerator support: None"
    r"|Found no NVIDIA driver"
    r"|No CUDA GPUs are available"
    r"|no CUDA-capable device"
    r"|No CUDA GPU available"
    r"|No HIP GPUs are available"
    r"|hipErrorNoDevice"
    r"|0 active drivers"
)
# Packages that exist only for GPUs: a harness importing one runs on the GPU machines, where
# they are installed. Any other missing module is the task's own failure.
GPU_PACKAGES = frozenset(
    {"aiter", "cupy", "cutlass", "cuda", "flashinfer", "helion", "pycuda", "tilelang", "triton"}
)
# Case errors that only say the process died first: its stderr says why.
_UNTOLD = frozenset({"", protocol.NO_RESULT, protocol.NO_TIMINGS, protocol.NOT_RUN})
_MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_]+)")


@dataclass(frozen=True)
class CheckTarget:
    name: str  # the leaderboard's name in a competition file, else the task's file name
    path: Path
    gpus: tuple[str, ...] = ()  # the GPU types it is meant for, where a competition file says


@dataclass(frozen=True)
class TaskCheck:
    name: str
    loaded: bool = False
    needs: str = ""  # what a run needs that this machine lacks; "" when it ran here
    passed: bool | None = None  # None: not run
    benchmark_s: float | None = None  # the score the ranking would use, from benchmark mode
    error: str = ""  # the first error in full (for `needs`, the line that says so)
    harness: str = ""  # what times its submissions
    guarantees: tuple[str, ...] = ()  # what its ranked timings can rely on
    caveat: str = ""  # what does not hold for them
    problem: str = ""  # why it cannot be ranked fairly, as `leaderboard create` refuses it

    @property
    def ok(self) -> bool:
        """Loads, can be ranked fairly, and passes wherever it could run."""
        return self.loaded and not self.problem and (bool(self.needs) or bool(self.passed))


def check_targets(path: Path) -> list[CheckTarget]:
    """The tasks at `path`: each problem of a competition file, else the one folder or zip."""
    if is_competition_file(path):
        competition = load_competition(path)
        return [CheckTarget(p.name, p.directory, p.gpus) for p in competition.problems]
    return [CheckTarget(path.stem if path.is_file() else path.resolve().name, path)]


def check_task(
    target: CheckTarget, *, gpu: GpuType, limits: Limits, run: RunFn, root: Path | None = None
) -> TaskCheck:
    try:
        task = load_task(target.path, root=root)
    except InvalidTaskError as exc:
        return TaskCheck(target.name, error=str(exc))
    told = guarantees(task)
    checked = _check_loaded(target, task, gpu=gpu, limits=limits, run=run)
    return replace(
        checked,
        harness=told.harness,
        guarantees=told.holds,
        caveat=told.caveat,
        problem=told.problem,
    )


def _check_loaded(
    target: CheckTarget, task: Task, *, gpu: GpuType, limits: Limits, run: RunFn
) -> TaskCheck:
    needed = _gpus_wanted(target)
    loaded = TaskCheck(target.name, loaded=True)
    if task.processes > gpu.devices:
        return _needs(
            loaded,
            f"{needed} with {task.processes} devices",
            f"its largest world_size is {task.processes}; {gpu.name} here has {gpu.devices}",
        )
    try:
        code = reference_as_submission(task)
    except InvalidTaskError as exc:
        if task.lang is Language.CUDA:
            return _needs(loaded, f"{needed}, and a solution", exc.reason)
        return TaskCheck(target.name, loaded=True, passed=False, error=exc.reason)
    return _run(loaded, task, code, limits, run, needed)


def _run(
    loaded: TaskCheck, task: Task, code: str, limits: Limits, run: RunFn, needed: str
) -> TaskCheck:
    # Benchmark mode runs the test phase first (the main in `test` mode), then the benchmarks,
    # each timed briefly: the check needs a figure, not a ranking's precision.
    limits = replace(limits, benchmark_case_s=CHECK_CASE_S)
    result = run(RunRequest.of_submission(task, code, Mode.BENCHMARK, limits))
    if not result.passed:
        if reason := gpu_missing(result):
            return _needs(loaded, needed, reason)
        return TaskCheck(loaded.name, loaded=True, passed=False, error=first_error(result))
    means = [b.mean for b in result.benchmarks]
    benchmark_s = scoring.score_seconds(means, task.ranking_by) if means else None
    return TaskCheck(loaded.name, loaded=True, passed=True, benchmark_s=benchmark_s)


def _needs(loaded: TaskCheck, needs: str, why: str) -> TaskCheck:
    return TaskCheck(loaded.name, loaded=True, needs=needs, error=why)


def _gpus_wanted(target: CheckTarget) -> str:
    if target.gpus:
        return " or ".join(target.gpus) if len(target.gpus) <= 2 else ", ".join(target.gpus)
    return _competition_gpus(target.path) or "a GPU"


def _competition_gpus(path: Path) -> str:
    """For a folder checked on its own: the GPU types the problem set's competition files list
    for it, if any does."""
    if not path.is_dir():
        return ""
    folder = path.resolve()
    root = problem_set_root(folder)
    for file in sorted(root.glob("*.y*ml")):
        try:
            problems = load_competition(file).problems if is_competition_file(file) else ()
        except InvalidTaskError:
            continue
        for problem in problems:
            if problem.directory == folder and problem.gpus:
                return ", ".join(problem.gpus)
    return ""


def reference_as_submission(task: Task) -> str:
    """The task's reference, with its `ref_kernel` under the name a submission exports."""
    if task.lang is Language.CUDA:
        raise InvalidTaskError(
            task.name,
            "files",
            "a CUDA task's reference is host code, not a submission: check it on its GPU with "
            "`cluster-manager eval TASK SOLUTION`",
        )
    reference = next((f for f in task.files if f.name == REFERENCE_FILE), None)
    if reference is None or reference.content is None:
        raise InvalidTaskError(
            task.name, "files", f"no {REFERENCE_FILE}: nothing to run as the submission"
        )
    return f"{reference.content.rstrip()}\n\n\ncustom_kernel = ref_kernel\n"


def gpu_missing(result: RunResult) -> str:
    """The line of a failed run that says this machine lacks a GPU it needs, or ""."""
    for line in _error_lines(result):
        if line[:1].isspace():  # a traceback's source lines quote the code, not the error
            continue
        if _NO_GPU.search(line):
            return line.strip()
        missing = _MISSING_MODULE.search(line)
        if missing and missing.group(1) in GPU_PACKAGES:
            return line.strip()
    return ""


def _error_lines(result: RunResult) -> Iterator[str]:
    if result.compilation is not None:
        yield from result.compilation.output.splitlines()
    for phase in result.phases:  # the whole stderr line before the message that clips it
        yield from phase.stderr.splitlines()
        for case in _cases(phase):
            yield from case.error.splitlines()
        yield phase.message


def first_error(result: RunResult) -> str:
    """What went wrong first, in full: a compiler's output, the first failed case's error, or
    the harness's last traceback."""
    if result.compilation is not None and not result.compilation.success:
        return result.compilation.output.strip() or result.message
    for phase in result.phases:
        for case in _cases(phase):
            if not case.passed and case.error not in _UNTOLD:
                return f"{phase.name} {case.index} ({case.spec}): {case.error.strip()}"
        traceback = phase.stderr.rfind("Traceback (most recent call last)")
        if traceback >= 0:
            return phase.stderr[traceback:].strip()
    return result.message


def _cases(phase: PhaseOutcome) -> tuple[TestOutcome | BenchmarkOutcome, ...]:
    return (*phase.tests, *phase.benchmarks)
