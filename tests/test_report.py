"""The terminal report: a ranked run that stopped at a failed case, within 80 columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.protocol import NOT_RUN
from cluster_manager.core.records import LeaderboardSummary
from cluster_manager.core.run_results import BenchmarkOutcome, PhaseOutcome, RunResult
from cluster_manager.rendering.reports import (
    TERMINAL_WIDTH,
    format_duration_ns,
    format_leaderboards,
    format_report,
)

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


def test_the_listing_tells_an_ended_board_from_an_invite_only_one():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    boards = [
        LeaderboardSummary("past", now - timedelta(days=1), ("CPU",), 3),
        LeaderboardSummary("finals", now + timedelta(days=2), ("CPU",), 1, invite_only=True),
    ]
    past, finals = format_leaderboards(boards, now).splitlines()[2:]
    assert past.split()[-3:] == ["ended", "public", "3"]
    assert finals.split()[-4:] == ["2", "days", "invite-only", "1"]
    assert "closed" not in format_leaderboards(boards, now)
