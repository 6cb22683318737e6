"""What a run adds up to: the one RunResult the runner emits, with its verdict and score."""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from typing import Any

from cluster_manager.core import scoring
from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.run_results import (
    BenchmarkOutcome,
    CompileOutcome,
    PhaseOutcome,
    RunResult,
)
from cluster_manager.core.speed_of_light import Peaks, case_speed, speed_review


def total(durations: dict[str, float], began: float) -> dict[str, float]:
    """The phases' durations and the whole run's, from `began` (a `time.monotonic()`) to now."""
    return {**durations, "total": round(time.monotonic() - began, 3)}


def of_phases(
    request: RunRequest,
    phases: list[PhaseOutcome],
    planned: int,
    *,
    compilation: CompileOutcome | None,
    system: dict[str, Any],
    durations: dict[str, float],
) -> RunResult:
    """A run passes when each of its `planned` phases ran and passed; else the first failure
    is its verdict."""
    failed = next((p for p in phases if p.verdict is not Verdict.PASSED), None)
    passed = failed is None and len(phases) == planned
    verdict = Verdict.PASSED if failed is None else failed.verdict
    message = "; ".join(p.message for p in phases) if failed is None else failed.message
    score, review, unusable = _score(request, phases) if passed else (None, "", "")
    if unusable:
        passed, verdict, message = False, Verdict.RUNTIME_ERROR, unusable
    return RunResult(
        passed=passed,
        verdict=verdict,
        mode=request.mode,
        message=message,
        phases=tuple(phases),
        compilation=compilation,
        score=score,
        system=system,
        review=review,
        durations=durations,
    )


def compile_failed(
    request: RunRequest,
    compilation: CompileOutcome,
    *,
    system: dict[str, Any],
    durations: dict[str, float],
) -> RunResult:
    return RunResult(
        passed=False,
        verdict=Verdict.COMPILE_ERROR,
        mode=request.mode,
        message=f"compilation failed: {_tail_line(compilation.output)}",
        compilation=compilation,
        system=system,
        durations=durations,
    )


def refused(
    request: RunRequest,
    reason: str,
    system: dict[str, Any],
    durations: dict[str, float],
    compilation: CompileOutcome | None = None,
) -> RunResult:
    """A run this runner must not start (fewer GPUs than the run needs, or none for CUDA
    code): the runner's configuration is at fault, not the submission."""
    return RunResult(
        passed=False,
        verdict=Verdict.INTERNAL_ERROR,
        mode=request.mode,
        message=f"the runner refused the run: {reason}",
        compilation=compilation,
        system=system,
        durations=durations,
    )


def internal_error(
    request: RunRequest, exc: Exception, *, durations: dict[str, float]
) -> RunResult:
    """The runner's own failure: its traceback goes where the system info would."""
    return RunResult(
        passed=False,
        verdict=Verdict.INTERNAL_ERROR,
        mode=request.mode,
        message=f"internal error in the runner: {exc!r}",
        phases=(),
        system={"traceback": "".join(traceback.format_exception(exc))[-4000:]},
        durations=durations,
    )


def _score(request: RunRequest, phases: list[PhaseOutcome]) -> tuple[float | None, str, str]:
    """The score and why it is held for review, or why the reported timings cannot be one
    (a main that reported 0 ns)."""
    ranked = [p for p in phases if p.name == "leaderboard" and p.verdict is Verdict.PASSED]
    if not ranked:
        return None, "", ""
    means = [b.mean for b in ranked[0].benchmarks]
    try:
        score = scoring.score_seconds(means, request.task.ranking_by)
    except ValueError as exc:
        return None, "", f"leaderboard: unusable timings ({exc})"
    return score, scoring.floor_review(means, request.task.floors_us), ""


def with_speed_of_light(result: RunResult, request: RunRequest, peaks: Peaks | None) -> RunResult:
    """Each timed case against the speed of light (`core.speed_of_light`): computed here,
    outside the task's processes, from the task's formulas, the case's values and its mean.
    A scored run with a case over 100 % of a published peak is held for review."""
    if request.task.speed_of_light is None:
        return result
    phases = tuple(
        replace(p, benchmarks=tuple(_with_speed(b, request, peaks) for b in p.benchmarks))
        for p in result.phases
    )
    result = replace(result, phases=phases)
    ranked = [p for p in phases if p.name == Mode.LEADERBOARD]
    if result.score is None or not ranked:
        return result
    review = speed_review({b.index: b.speed for b in ranked[0].benchmarks if b.speed})
    return replace(result, review="; ".join(r for r in (result.review, review) if r))


def _with_speed(b: BenchmarkOutcome, request: RunRequest, peaks: Peaks | None) -> BenchmarkOutcome:
    cases = request.task.benchmarks
    if not (b.passed and b.runs > 0 and 0 <= b.index < len(cases)):
        return b
    return replace(b, speed=case_speed(request.task.speed_of_light, cases[b.index], b.mean, peaks))


def _tail_line(text: str) -> str:
    """The compiler's first error line, else its last line."""
    errors = [ln for ln in text.splitlines() if "error" in ln.lower()]
    return (errors[0] if errors else (text.strip().splitlines() or [""])[-1])[:300]
