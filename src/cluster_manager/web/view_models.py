"""What the templates show, built from the service's records: scores in human units, gaps,
times as text. Templates only lay these out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from cluster_manager.core.models import RunResult
from cluster_manager.core.records import (
    Job,
    Leaderboard,
    RankingEntry,
    RunRecord,
    ScoreHistory,
)
from cluster_manager.rendering.reports import format_duration_ns, format_time_left
from cluster_manager.service import TERMINAL_STATES, SubmissionReport


def seconds_text(seconds: float) -> str:
    return format_duration_ns(seconds * 1e9)


def when_text(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Leader:
    user: str
    score: str


@dataclass(frozen=True)
class Tile:
    name: str
    summary: str  # the description's first line
    deadline_iso: str
    deadline_text: str
    time_left: str
    submissions: int
    leaders: list[tuple[str, list[Leader]]]  # per GPU, the top three
    invite_only: bool


def description_of(board: Leaderboard) -> str:
    return board.description or board.task.description


def tile(
    board: Leaderboard, submissions: int, rankings: dict[str, list[RankingEntry]], now: datetime
) -> Tile:
    description = description_of(board)
    return Tile(
        name=board.name,
        summary=next((line.strip() for line in description.splitlines() if line.strip()), ""),
        deadline_iso=board.deadline.isoformat(),
        deadline_text=when_text(board.deadline),
        time_left=format_time_left(board.deadline, now),
        submissions=submissions,
        leaders=[
            (gpu, [Leader(e.user, seconds_text(e.score)) for e in entries])
            for gpu, entries in rankings.items()
        ],
        invite_only=board.closed,
    )


@dataclass(frozen=True)
class RankingRow:
    rank: int
    user: str
    score: str
    gap: str  # to the row above; empty for the first
    submitted: str
    submitted_iso: str
    submission_id: int


def ranking_rows(entries: list[RankingEntry]) -> list[RankingRow]:
    rows = []
    for above, entry in zip([None, *entries], entries, strict=False):
        gap = ""
        if above is not None:
            delta = entry.score - above.score
            share = f" ({delta / above.score:+.1%})" if above.score > 0 else ""
            gap = f"+{seconds_text(delta)}{share}" if delta > 0 else "tie"
        rows.append(
            RankingRow(
                entry.rank,
                entry.user,
                seconds_text(entry.score),
                gap,
                when_text(entry.submitted_at),
                entry.submitted_at.isoformat(),
                entry.submission_id,
            )
        )
    return rows


@dataclass(frozen=True)
class RecordRow:
    """A moment the fastest score on a GPU fell: the chart's step line as text."""

    at: str
    user: str
    score: str


def record_rows(history: ScoreHistory) -> list[RecordRow]:
    rows: list[RecordRow] = []
    best: float | None = None
    for point in history.points:
        if best is None or point.score < best:
            best = point.score
            rows.append(RecordRow(when_text(point.at), point.user, seconds_text(point.score)))
    return rows


@dataclass(frozen=True)
class GpuSection:
    gpu: str
    anchor: str
    rows: list[RankingRow]
    records: list[RecordRow]


@dataclass(frozen=True)
class JobLine:
    job_id: int
    gpu: str
    secret: bool
    state: str
    detail: str
    done: bool


def job_lines(jobs: tuple[Job, ...]) -> list[JobLine]:
    return [
        JobLine(
            j.id, j.gpu, j.secret, j.state.value, j.error or "", done=j.state in TERMINAL_STATES
        )
        for j in jobs
    ]


@dataclass(frozen=True)
class BenchmarkRow:
    case: str
    mean: str
    best: str
    worst: str
    runs: int
    error: str


@dataclass(frozen=True)
class RunView:
    gpu: str
    secret: bool
    mode: str
    verdict: str
    passed: bool
    score: str
    benchmarks: list[BenchmarkRow]


def run_view(run: RunRecord) -> RunView:
    benchmarks = []
    if run.result and not run.redacted:
        for phase in RunResult.from_json(run.result).phases:
            for b in phase.benchmarks:
                if b.passed and b.runs:
                    timing = f"{format_duration_ns(b.mean)} ± {format_duration_ns(b.err)}"
                    benchmarks.append(
                        BenchmarkRow(
                            b.spec,
                            timing,
                            format_duration_ns(b.best),
                            format_duration_ns(b.worst),
                            b.runs,
                            "",
                        )
                    )
                elif not b.passed:
                    benchmarks.append(BenchmarkRow(b.spec, "", "", "", 0, b.error or "skipped"))
    return RunView(
        run.gpu,
        run.secret,
        run.mode.value,
        run.verdict.value,
        run.passed,
        "" if run.score is None else seconds_text(run.score),
        benchmarks,
    )


@dataclass(frozen=True)
class SubmissionLine:
    """One of the signed-in user's submissions, on a leaderboard's page."""

    submission_id: int
    file_name: str
    mode: str
    submitted: str
    status: str


def submission_line(report: SubmissionReport) -> SubmissionLine:
    status = "running" if not report.done else "passed" if report.passed else "failed"
    stored = report.submission
    return SubmissionLine(
        stored.id, stored.file_name, stored.mode.value, when_text(stored.submitted_at), status
    )
