"""The terminal report: a ranked run that stopped at a failed case, within 80 columns."""

from __future__ import annotations

from cluster_manager.core.models import (
    BenchmarkOutcome,
    Mode,
    PhaseOutcome,
    RunResult,
    Verdict,
)
from cluster_manager.core.protocol import NOT_RUN
from cluster_manager.report import TERMINAL_WIDTH, format_duration_ns, format_report

LONG_SPEC = "m: 1024; n: 1536; k: 7168; seed: 8135; dtype: bfloat16; layout: row-major"


def _stopped_run(first_spec: str) -> RunResult:
    benchmarks = (
        BenchmarkOutcome(0, first_spec, True, runs=100, mean=123e3, err=2e3, best=1e5, worst=1e7),
        BenchmarkOutcome(1, "size: 2", False, error="Traceback …\nRuntimeError: " + "x" * 200),
        BenchmarkOutcome(2, "size: 3", False, error=NOT_RUN, skipped=True),
    )
    phase = PhaseOutcome(
        "leaderboard",
        1,
        False,
        1.0,
        "",
        "",
        Verdict.RUNTIME_ERROR,
        "benchmark 1 failed",
        benchmarks=benchmarks,
    )
    return RunResult(False, Verdict.RUNTIME_ERROR, Mode.LEADERBOARD, "failed", phases=(phase,))


def test_cases_after_a_failure_say_they_were_not_run():
    text = format_report(_stopped_run("size: 1"))
    (skipped,) = [line for line in text.splitlines() if "size: 3" in line]
    assert "not run: an earlier case failed" in skipped and "❌" not in skipped
    assert "no timings reported" not in text


def test_the_table_fits_an_80_column_terminal():
    for first in ("size: 1", LONG_SPEC):
        lines = format_report(_stopped_run(first)).splitlines()
        assert max(len(line) for line in lines) <= TERMINAL_WIDTH, lines
        assert any("123 µs ± 2 µs" in line for line in lines)
        assert any(line.strip() == LONG_SPEC for line in lines) == (first == LONG_SPEC)


def test_a_duration_just_under_a_unit_is_shown_in_that_unit():
    assert format_duration_ns(999.9996) == "1 µs"
    assert format_duration_ns(999_999.7) == "1 ms"
    assert format_duration_ns(999.4) == "999 ns"
    assert format_duration_ns(1_500) == "1.5 µs"
