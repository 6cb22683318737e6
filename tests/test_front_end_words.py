"""The same words on every front end (CLI, Discord, web): where a job went, how long a board
still runs, how many cases a phase has, what a rank's score is, and the author's own file
name where the runner says `submission.py`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.progress import phase_started
from cluster_manager.core.records import EventState, JobEvent, Placement, RunRecord
from cluster_manager.core.run_results import BenchmarkOutcome, PhaseOutcome, RunResult
from cluster_manager.discord.live import job_line
from cluster_manager.rendering.reports import format_event, format_placement, format_time_left
from cluster_manager.web import view_models

LIVE_JS = Path(view_models.__file__).with_name("static") / "live.js"
NOW = datetime(2026, 11, 28, 9, 31, 12, 345678, tzinfo=UTC)


def test_a_dispatch_is_said_in_the_same_words_everywhere():
    event = JobEvent(1, 1, "CPU", False, EventState.DISPATCHED, detail="local")
    assert format_event(event) == "[CPU] dispatched to the local launcher"
    assert job_line(event) == "🚀 **CPU**: dispatched to the local launcher"
    unnamed = JobEvent(1, 1, "CPU", False, EventState.DISPATCHED)
    assert format_event(unnamed) == "[CPU] dispatched to a launcher"
    script = LIVE_JS.read_text()  # the web page's live progress
    assert '"dispatched to the " + event.detail + " launcher"' in script
    assert '"dispatched to a launcher"' in script


@pytest.mark.parametrize(
    ("left", "said"),
    [
        (timedelta(days=3, hours=4, minutes=30), "3 days 4 hours"),
        (timedelta(days=1, minutes=5), "1 day"),
        (timedelta(hours=1, minutes=1), "1 hour 1 minute"),
        (timedelta(hours=5), "5 hours"),
        (timedelta(minutes=12, seconds=30), "12 minutes"),
        (timedelta(seconds=30), "under a minute"),
        (timedelta(days=26391), "over a year"),  # a board made with a 2099 deadline
        (timedelta(seconds=-1), "ended"),
    ],
)
def test_time_left_is_said_in_words(left: timedelta, said: str):
    assert format_time_left(NOW + left, NOW) == said


def test_a_phase_counts_its_cases_in_words():
    assert phase_started({"event": "phase", "phase": "test", "cases": 1}) == "test: 1 case"
    assert phase_started({"event": "phase", "phase": "benchmark", "cases": 3}) == (
        "benchmark: 3 cases"
    )


def test_a_rank_says_its_score_is_the_slower_run_of_the_pair():
    placement = Placement("CPU", 1, 191e-6, True, None)
    pair = "191 µs (the slower of your public and secret runs)"
    assert format_placement(placement) == f"[CPU] 🏆 rank #1 with {pair}: a new personal best"
    assert view_models.placement_text(placement) == (
        "#1 with 191 µs (the slower of its public and secret runs)"
    )


def test_the_web_pages_rows_name_the_authors_own_file():
    failed = BenchmarkOutcome(0, "size: 8", False, error="ValueError: boom (submission.py, line 2)")
    phase = PhaseOutcome(
        "benchmark", 1, False, 0.1, "", "", Verdict.RUNTIME_ERROR, "failed", benchmarks=(failed,)
    )
    result = RunResult(False, Verdict.RUNTIME_ERROR, Mode.BENCHMARK, "failed", phases=(phase,))
    run = RunRecord(
        *(1, 1, "quick", "alice", "CPU", Mode.BENCHMARK, False, False, Verdict.RUNTIME_ERROR),
        *(None, "crash.py", NOW, NOW),
        result=result.to_json(),
    )
    (row,) = view_models.run_view(run).benchmarks
    assert row.error == "ValueError: boom (crash.py, line 2)"
