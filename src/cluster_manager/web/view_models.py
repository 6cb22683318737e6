"""What the templates show, built from the service's records: scores in human units, gaps,
times as text. Templates only lay these out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from markupsafe import Markup

from cluster_manager.core.records import (
    Job,
    JobState,
    Leaderboard,
    Placement,
    RankingEntry,
    RunRecord,
    ScoreHistory,
)
from cluster_manager.core.run_results import BenchmarkOutcome, RunResult
from cluster_manager.core.submission import in_own_names
from cluster_manager.core.teams import Team
from cluster_manager.rendering.reports import (
    format_duration_ns,
    format_time_left,
    pair_score,
    submission_outcome,
    verdict_text,
)
from cluster_manager.rendering.speed import bandwidth_text, flop_rate_text, peaks_text, share_text
from cluster_manager.service import SubmissionReport, Submitter
from cluster_manager.web.markdown_text import render_summary


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
    summary: Markup  # the description's first line, its Markdown as HTML
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
        summary=render_summary(
            next((line.strip() for line in description.splitlines() if line.strip()), "")
        ),
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
    of_peak: str = ""  # the score's share of the speed of light, where it is known
    team: str = ""  # the entry is this team's; `user` is the member whose submission it is


def ranking_rows(
    entries: list[RankingEntry], of_peak: Callable[[float], str] = lambda score: ""
) -> list[RankingRow]:
    """`of_peak`: a score's share of the speed of light as text (`speed_views.share_text`)."""
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
                of_peak(entry.score),
                entry.team or "",
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
    of_peak: bool = False  # whether the ranking has a column of the scores' share of peak


AFTER_DEADLINE = "after-deadline"  # the `ranking` query parameter of the runs' tab


@dataclass(frozen=True)
class RankingTab:
    """One of an ended leaderboard's rankings, as a link: the competition's or that of the
    runs after the deadline."""

    label: str
    href: str
    current: bool


def ranking_tabs(page: str, after_deadline: bool) -> list[RankingTab]:
    """`page`: the leaderboard page's path; `after_deadline`: that tab is the current one."""
    return [
        RankingTab("Competition", page, not after_deadline),
        RankingTab("After the deadline", f"{page}?ranking={AFTER_DEADLINE}", after_deadline),
    ]


def placement_text(placement: Placement) -> str:
    """Where a ranked submission stands on one GPU, saying in which ranking."""
    if placement.rank is None:
        return "not ranked (yet)"
    among = " among runs after the deadline" if placement.after_deadline else ""
    if placement.improved and placement.score is not None:
        return f"#{placement.rank}{among} with {pair_score(placement.score, 'its')}"
    if placement.improved:
        return f"#{placement.rank}{among}"
    return f"its author's best, another submission, is #{placement.rank}{among}"


@dataclass(frozen=True)
class JobLine:
    """One job on its submission's page: `outcome` is its state as one word (queued,
    starting, dispatched, or its run's verdict), `text` the same for people."""

    job_id: int
    gpu: str
    secret: bool
    outcome: str
    text: str
    detail: str


def job_lines(
    jobs: tuple[Job, ...], runs: tuple[RunRecord, ...], positions: dict[int, int | None]
) -> list[JobLine]:
    """`positions`: the jobs' places in their GPU's line, where the service gave them."""
    verdicts = {r.job_id: r.verdict.value for r in runs}
    lines = []
    for job in jobs:
        detail = job.error or ""
        match job.state:
            case JobState.QUEUED:
                outcome = "queued"
                if (position := positions.get(job.id)) is not None:
                    detail = f"#{position} in line"
            case JobState.CLAIMED:
                outcome = "starting"
            case JobState.DISPATCHED:
                outcome = "dispatched"
            case JobState.FINISHED:
                outcome = verdicts.get(job.id, "finished")
            case _:
                outcome = "failed"
        lines.append(JobLine(job.id, job.gpu, job.secret, outcome, verdict_text(outcome), detail))
    return lines


@dataclass(frozen=True)
class BenchmarkRow:
    case: str
    mean: str
    best: str
    worst: str
    runs: int
    error: str
    # Against the speed of light (`rendering.speed`): achieved rates and the share of peak.
    bandwidth: str = ""
    flop_rate: str = ""
    of_peak: str = ""


@dataclass(frozen=True)
class RunView:
    gpu: str
    secret: bool
    mode: str
    verdict: str  # its value: the outcome's key
    verdict_text: str
    passed: bool
    score: str
    benchmarks: list[BenchmarkRow]
    peaks: str = ""  # what its cases' share of peak is of; "" when none has figures


def _benchmark_row(b: BenchmarkOutcome) -> BenchmarkRow:
    if not b.passed:
        return BenchmarkRow(b.spec, "", "", "", 0, b.error or "skipped")
    timing = f"{format_duration_ns(b.mean)} ± {format_duration_ns(b.err)}"
    best, worst = format_duration_ns(b.best), format_duration_ns(b.worst)
    if b.speed is None:
        return BenchmarkRow(b.spec, timing, best, worst, b.runs, "")
    speed = b.speed
    return BenchmarkRow(
        b.spec,
        timing,
        best,
        worst,
        b.runs,
        "",
        bandwidth_text(speed),
        flop_rate_text(speed),
        share_text(speed),
    )


def run_view(run: RunRecord) -> RunView:
    benchmarks, peaks = [], ""
    if run.result and not run.redacted:
        for b in RunResult.from_json(run.result).benchmarks:
            if (b.passed and b.runs) or not b.passed:
                row = _benchmark_row(b)  # its error names the author's file, as they called it
                benchmarks.append(replace(row, error=in_own_names(row.error, run.file_name)))
            if b.speed is not None and not peaks:
                peaks = peaks_text(b.speed)
    return RunView(
        run.gpu,
        run.secret,
        run.mode.value,
        run.verdict.value,
        verdict_text(run.verdict.value),
        run.passed,
        "" if run.score is None else seconds_text(run.score),
        benchmarks,
        peaks,
    )


@dataclass(frozen=True)
class SubmissionLine:
    """One of the signed-in user's submissions, on a leaderboard's page."""

    submission_id: int
    file_name: str
    mode: str
    submitted: str
    status: str  # `submission_outcome`: queued, running, passed or a verdict
    status_text: str


def submission_line(report: SubmissionReport) -> SubmissionLine:
    status = submission_outcome(report)
    stored = report.submission
    return SubmissionLine(
        stored.id,
        stored.file_name,
        stored.mode.value,
        when_text(stored.submitted_at),
        status,
        verdict_text(status),
    )


@dataclass(frozen=True)
class TeamView:
    """A team in the leaderboard page's Teams section."""

    name: str
    members: list[str]  # as the rankings show users: their external ids, in joining order
    size_text: str  # "2 of 4 members"
    viewers: bool  # the signed-in user is one of its members


def team_view(team: Team, viewer: Submitter | None) -> TeamView:
    count = len(team.members)
    noun = "member" if team.size_limit == 1 else "members"
    return TeamView(
        team.name,
        list(team.members),
        f"{count} of {team.size_limit} {noun}",
        viewer is not None and viewer.external_id in team.members,
    )
