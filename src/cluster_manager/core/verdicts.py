"""Turns what one phase's process did and reported into a verdict and a message.

Only the process's fate (exit status, timeout) and the result pipe count; nothing the
submission prints to stdout or stderr can make a run pass or fail.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cluster_manager.core import protocol
from cluster_manager.core.models import RunMode, ScriptMode, Verdict
from cluster_manager.core.run_results import BenchmarkOutcome, TestOutcome


@dataclass(frozen=True)
class PhaseJudgement:
    verdict: Verdict
    message: str
    tests: tuple[TestOutcome, ...]
    benchmarks: tuple[BenchmarkOutcome, ...]


TRACEBACK_HEAD = "Traceback (most recent call last)"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')


def headline(text: str, limit: int = 300) -> str:
    """The line that says what went wrong: a check's first line (the count and tolerance,
    before the details), or a traceback's last (the exception) with where it was raised."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0]
    if lines[0].startswith(TRACEBACK_HEAD):
        line = lines[-1]
        frames = [m for m in map(_FRAME.match, lines) if m]
        if frames:
            line += f" ({frames[-1]['file']}, line {frames[-1]['line']})"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def judge_phase(
    phase: RunMode,
    *,
    case_count: int,
    exit_code: int | None,
    timed_out: bool,
    timeout_s: float,
    result: Mapping[str, str],
    specs: Sequence[str] = (),
) -> PhaseJudgement:
    if phase == ScriptMode.SCRIPT:
        return _judge_script(exit_code, timed_out, timeout_s)
    tests = tuple(protocol.tests_from_result(result, limit=case_count, specs=specs))
    benchmarks = tuple(protocol.benchmarks_from_result(result, limit=case_count, specs=specs))

    def judged(verdict: Verdict, message: str) -> PhaseJudgement:
        return PhaseJudgement(verdict, message, tests, benchmarks)

    if timed_out:
        return judged(Verdict.TIMEOUT, f"{phase}: exceeded the time limit of {timeout_s:g} s")

    check = result.get("check")
    if check == "fail":
        return judged(*_reported_failure(phase, tests, benchmarks, result))

    if exit_code is not None and exit_code < 0:
        name = _signal_name(-exit_code)
        if -exit_code == signal.SIGKILL:
            return judged(Verdict.MEMORY_LIMIT, f"{phase}: killed by {name} (out of memory?)")
        return judged(Verdict.RUNTIME_ERROR, f"{phase}: killed by {name}")
    if exit_code != 0:
        return judged(Verdict.RUNTIME_ERROR, f"{phase}: the harness exited with code {exit_code}")
    if check != "pass":
        return judged(Verdict.RUNTIME_ERROR, f"{phase}: the harness ended without a result")

    kind = "test" if phase == "test" else "benchmark"
    outcomes: tuple[TestOutcome | BenchmarkOutcome, ...] = tests if kind == "test" else benchmarks
    reported = result.get(f"{kind}-count", "0")
    complete = reported == str(case_count) and len(outcomes) == case_count
    if not complete:
        shown = reported if reported.isdigit() else str(len(outcomes))
        return judged(
            Verdict.RUNTIME_ERROR, f"{phase}: {shown} of {case_count} {kind} results reported"
        )
    failed = next((o for o in outcomes if not o.passed), None)
    if failed is not None:
        return judged(
            Verdict.RUNTIME_ERROR,
            f"{phase}: the harness said pass, but {kind} {failed.index} has no passing result",
        )
    return judged(Verdict.PASSED, f"{phase}: all {case_count} {kind}s passed")


def _reported_failure(
    phase: RunMode,
    tests: tuple[TestOutcome, ...],
    benchmarks: tuple[BenchmarkOutcome, ...],
    result: Mapping[str, str],
) -> tuple[Verdict, str]:
    """The harness said "fail": the verdict the failed cases name, and the first of them."""
    failures = [(f"test {t.index}", t.error, f"test.{t.index}") for t in tests if not t.passed]
    failures += [
        (f"benchmark {b.index}", b.error, f"benchmark.{b.index}")
        for b in benchmarks
        if not (b.passed or b.skipped)
    ]
    kinds = {result.get(f"{prefix}.verdict") for _, _, prefix in failures}
    if Verdict.MEMORY_LIMIT.value in kinds:
        verdict = Verdict.MEMORY_LIMIT
    elif Verdict.RUNTIME_ERROR.value in kinds:
        verdict = Verdict.RUNTIME_ERROR
    elif Verdict.TIMEOUT.value in kinds:  # a case that ran out of time for its timings
        verdict = Verdict.TIMEOUT
    else:
        verdict = Verdict.WRONG_ANSWER
    if failures:
        where, error, _ = failures[0]
        return verdict, f"{phase}: {where} failed: {headline(error)}"
    if error := result.get("error", "").strip():  # a main's own reason (no GPU, bad tests file)
        return verdict, f"{phase}: the harness reported a failure: {headline(error)}"
    return verdict, f"{phase}: the harness reported a failure"


def _judge_script(exit_code: int | None, timed_out: bool, timeout_s: float) -> PhaseJudgement:
    """A script has no result pipe: it passes when it exits with status 0 in time."""
    if timed_out:
        verdict, message = Verdict.TIMEOUT, f"script: exceeded the time limit of {timeout_s:g} s"
    elif exit_code == 0:
        verdict, message = Verdict.PASSED, "script: exited with status 0"
    elif exit_code is not None and exit_code < 0:
        verdict, message = Verdict.RUNTIME_ERROR, f"script: killed by {_signal_name(-exit_code)}"
    else:
        verdict, message = Verdict.RUNTIME_ERROR, f"script: exited with status {exit_code}"
    return PhaseJudgement(verdict, message, (), ())
