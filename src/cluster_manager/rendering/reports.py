"""Readable text for a RunResult: what a terminal (and later a Discord embed) shows."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cluster_manager.core import sandboxing
from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.run_results import BenchmarkOutcome, RunResult
from cluster_manager.core.sandboxing import SANDBOX_KEY
from cluster_manager.core.submission import in_own_names
from cluster_manager.core.telemetry import summary_line
from cluster_manager.core.verdicts import headline
from cluster_manager.core.wording import counted as counted
from cluster_manager.core.wording import dispatched_to, span_text, utc_minute
from cluster_manager.rendering.speed import speed_table

if TYPE_CHECKING:  # `eval` prints only RunResults: it need not build the service's records
    from cluster_manager.core.records import JobEvent, LeaderboardSummary, Placement, RankingEntry
    from cluster_manager.core.teams import Team
    from cluster_manager.service import SubmissionReport
    from cluster_manager.service.task_check import TaskCheck


def format_duration_ns(ns: float) -> str:
    rounded = float(f"{ns:.3g}")  # 999.9996 ns is shown as 1 µs, not as 1e+03 ns
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if rounded >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


TERMINAL_WIDTH = 80  # reports are read in terminals and code blocks of this width


def _clip(line: str) -> str:
    return line if len(line) <= TERMINAL_WIDTH else line[: TERMINAL_WIDTH - 1] + "…"


def _timings(b: BenchmarkOutcome) -> tuple[str, ...]:
    mean = f"{format_duration_ns(b.mean)} ± {format_duration_ns(b.err)}"
    return (mean, format_duration_ns(b.best), format_duration_ns(b.worst), str(b.runs))


def _benchmark_outcome(b: BenchmarkOutcome) -> str:
    if b.skipped:
        return f"· {b.error}"
    return "❌ " + (headline(b.error) or "failed")


def _benchmark_table(benchmarks: tuple[BenchmarkOutcome, ...]) -> list[str]:
    """One row a case; when the case names are too long for the width, each name has a line
    of its own and its timings go on the next."""
    header = ("mean ± err", "best", "worst", "runs")
    rows = {b.index: _timings(b) for b in benchmarks if b.passed and b.runs}
    widths = [max(len(r[i]) for r in [header, *rows.values()]) for i in range(len(header))]
    case_width = max(len("case"), *(len(b.spec) for b in benchmarks))
    numbers_width = sum(widths) + 2 * (len(widths) - 1)
    inline = 2 + case_width + 2 + numbers_width <= TERMINAL_WIDTH

    def numbers(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    if inline:
        lines = [f"  {'case'.ljust(case_width)}  {numbers(header)}"]
    else:
        lines = ["  case", f"      {numbers(header)}"]
    for b in benchmarks:
        detail = numbers(rows[b.index]) if b.index in rows else _benchmark_outcome(b)
        if not (b.index in rows or not b.passed):
            continue  # passed without timings: a profile, shown on its own
        if inline:
            lines.append(_clip(f"  {b.spec.ljust(case_width)}  {detail}"))
        else:
            lines += [_clip(f"  {b.spec}"), _clip(f"      {detail}")]
    return lines


def format_report(
    result: RunResult, *, title: str = "", file_name: str = "", slot: str | None = None
) -> str:
    """A run's report; with `file_name`, its errors name the user's file where the runner's
    say the task's name for it (`slot`, see `in_own_names`)."""
    text = _report_lines(result, title)
    return in_own_names(text, file_name, slot) if file_name else text


def _report_lines(result: RunResult, title: str) -> str:
    icon = "✅" if result.passed else "❌"
    total = result.durations.get("total")
    head = f"{icon} {title + ' — ' if title else ''}{result.mode.value}: {result.verdict.value}"
    lines = [head + (f" ({total:.1f} s)" if total is not None else "")]
    if result.compilation is not None and not result.compilation.success:
        lines += [
            "",
            "Compilation failed:",
            *("  " + ln for ln in result.compilation.output.splitlines()[-30:]),
        ]
    for phase in result.phases:
        if phase.tests:
            lines += ["", f"Tests ({phase.name} phase)"]
            for t in phase.tests:
                mark = "✅" if t.passed else "❌"
                detail = "" if t.passed else f" — {headline(t.error)}"
                lines.append(f"  {mark} {t.spec}{detail}")
        if phase.benchmarks and any(b.report for b in phase.benchmarks):
            for b in phase.benchmarks:
                lines += ["", f"Profile of {b.spec}", b.report.rstrip()]
        elif phase.benchmarks:
            lines += ["", f"Benchmarks ({phase.name} phase)", *_benchmark_table(phase.benchmarks)]
            if table := speed_table(phase.benchmarks, TERMINAL_WIDTH):
                lines += ["", f"Speed of light ({phase.name} phase)", *map(_clip, table)]
        if phase.profiler is not None:  # an ncu report attached, or why the torch profiler
            lines += ["", phase.profiler.summary()]
        if phase.verdict is not Verdict.PASSED and phase.stderr.strip():
            lines += ["", f"stderr ({phase.name} phase, last lines):"]
            lines += ["  " + ln for ln in phase.stderr.strip().splitlines()[-15:]]
    if gpu_line := summary_line(result.telemetry):
        lines += ["", gpu_line]
    if result.score is not None:
        lines += ["", f"Score: {format_duration_ns(result.score * 1e9)}"]
    if result.review:
        lines += ["", f"⚠️ {result.review}"]
    if result.mode is Mode.LEADERBOARD and SANDBOX_KEY in result.system:
        lines += ["", sandboxing.describe(result.system)]
    if not result.passed:
        lines += ["", result.message]
    return "\n".join(lines)


def format_submission_report(report: SubmissionReport, *, with_output: bool = False) -> str:
    """Every run's report (a secret run redacted for its author shows passed or failed only),
    then the jobs that failed without a run; `with_output` adds each phase's stdout and stderr
    (the bot's full log)."""
    from cluster_manager.core.records import JobState

    parts = []
    for run in report.runs:
        label = f"[{run.gpu}{' secret' if run.secret else ''}]"
        if run.redacted or not run.result:
            icon = "✅" if run.passed else "❌"
            what = "secret re-run" if run.secret else run.mode.value
            held = f" — {run.result['held']}" if run.result.get("held") else ""
            parts.append(f"{label} {icon} {what}: {run.verdict.value}{held}")
            continue
        result = RunResult.from_json(run.result)
        section = [label, format_report(result, title=run.file_name, file_name=run.file_name)]
        if with_output:  # the output too names the author's file where the runner's did
            section += [in_own_names(ln, run.file_name) for ln in _phase_output(result)]
        parts.append("\n".join(section))
    for job in report.jobs:
        if job.state is JobState.FAILED:
            why = f": {job.error}" if job.error else ""
            parts.append(f"[{job.gpu}{' secret' if job.secret else ''}] ❌ failed{why}")
    return "\n\n".join(parts)


def verdict_text(verdict: str) -> str:
    """A verdict (or `submission_outcome`) as a sentence says it: `wrong_answer` reads
    "wrong answer"."""
    return verdict.replace("_", " ")


def submission_outcome(report: SubmissionReport) -> str:
    """Where a submission stands, in one word: `queued` while its open jobs all wait,
    `running` once one has started, then `passed`, or the verdict of its first run that did
    not pass (`failed` for a job that ended without a run)."""
    from cluster_manager.core.records import JobState

    if not report.done:
        started = any(j.state in (JobState.CLAIMED, JobState.DISPATCHED) for j in report.jobs)
        return "running" if started else "queued"
    if report.passed:
        return Verdict.PASSED.value
    return next((r.verdict.value for r in report.runs if not r.passed), Verdict.FAILED.value)


def _phase_output(result: RunResult) -> list[str]:
    lines = []
    for phase in result.phases:
        for stream, text in (("stdout", phase.stdout), ("stderr", phase.stderr)):
            if text.strip():
                lines += ["", f"--- {stream} ({phase.name} phase) ---", text.rstrip()]
    return lines


def format_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


# A board past its deadline has ended; "invite-only" is the other way a board is shut
# (`admin close`), and the two are never called by the same word.
ENDED = "ended"
INVITE_ONLY = "invite-only"


def format_time_left(deadline: datetime, now: datetime) -> str:
    left = (deadline - now).total_seconds()
    return ENDED if left <= 0 else span_text(left)


def format_leaderboards(boards: list[LeaderboardSummary], now: datetime) -> str:
    if not boards:
        return "No leaderboards yet."
    rows = [
        (
            b.name,
            ", ".join(b.gpus),
            utc_minute(b.deadline),
            format_time_left(b.deadline, now),
            INVITE_ONLY if b.invite_only else "public",
            str(b.submissions),
        )
        for b in boards
    ]
    header = ("name", "GPUs", "deadline", "time left", "access", "submissions")
    return format_table(header, rows)


AFTER_THE_DEADLINE = "runs after the deadline"


def format_ranking(
    name: str, rankings: dict[str, list[RankingEntry]], *, after_deadline: bool = False
) -> str:
    """Per GPU, its ranking as a table; `after_deadline`: the rankings are those of the runs
    after the deadline, titled so that they are not read as the competition's."""
    parts = [f"{name} — {AFTER_THE_DEADLINE}"] if after_deadline else []
    empty = (
        "no run after the deadline is ranked yet" if after_deadline else "no ranked submissions yet"
    )
    for gpu, entries in rankings.items():
        parts.append(f"{name} on {gpu}")
        if not entries:
            parts.append(f"  {empty}")
            continue
        rows = [
            (
                f"#{e.rank}",
                ranked_as(e),
                format_duration_ns(e.score * 1e9),
                str(e.submission_id),
                e.submitted_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            )
            for e in entries
        ]
        table = format_table(("rank", "user", "score", "submission", "submitted (UTC)"), rows)
        parts.append("\n".join("  " + line for line in table.splitlines()))
    return "\n".join(parts)


def ranked_as(entry: RankingEntry) -> str:
    """Who an entry is: its user, or its team with the member whose submission is its best."""
    return entry.user if entry.team is None else f"{entry.team} ({entry.user})"


def format_team(team: Team) -> str:
    """A team's name and size, then its members in the order they joined."""
    size = f"{len(team.members)}/{team.size_limit} members"
    lines = [f"{team.name} on {team.leaderboard} ({size})"]
    lines += [f"  {member}" for member in team.members]
    return "\n".join(lines)


def format_teams(leaderboard: str, teams: Sequence[Team]) -> str:
    if not teams:
        return f"no teams on {leaderboard} yet"
    return "\n".join(format_team(t) for t in teams)


def format_event(event: JobEvent) -> str:
    from cluster_manager.core.records import EventState

    who = f"[{event.gpu}{' secret' if event.secret else ''}]"
    match event.state:
        case EventState.QUEUED:
            where = f" (position {event.position})" if event.position else ""
            return f"{who} queued{where}" + (f": {event.detail}" if event.detail else "")
        case EventState.DISPATCHED:
            return f"{who} {dispatched_to(event.detail)}"
        case EventState.RUNNING:
            return f"{who} running {event.detail}"
        case EventState.FINISHED:
            icon = "✅" if event.verdict == "passed" else "❌"
            return f"{who} {icon} {event.verdict}"
        case EventState.FAILED:
            return f"{who} ❌ failed" + (f": {event.detail}" if event.detail else "")
    return f"{who} {event.state} {event.detail}".rstrip()


def format_placement(placement: Placement) -> str:
    unranked = "not ranked (the public and the secret run must both pass)"
    if placement.rank is None:
        return f"[{placement.gpu}] {unranked}"
    best = format_duration_ns((placement.previous_best or 0) * 1e9)
    rank = _rank(placement)
    if placement.score is None:  # the user's best is another submission
        return f"[{placement.gpu}] {unranked}; your best stays {best} at {rank}"
    score = pair_score(placement.score)
    if placement.improved:
        return f"[{placement.gpu}] 🏆 {rank} with {score}: a new personal best"
    return f"[{placement.gpu}] {score}; your best stays {best} at {rank}"


def pair_score(score: float, whose: str = "your") -> str:
    """A ranked pair's score (seconds) saying that it is the slower of its two runs: without
    that, `Score: 176 µs` in the public run's report then a rank `with 191 µs` reads as a
    misprint."""
    return f"{format_duration_ns(score * 1e9)} (the slower of {whose} public and secret runs)"


def _rank(placement: Placement) -> str:
    """`rank #N`, saying which ranking where it is not the competition's."""
    among = f" among {AFTER_THE_DEADLINE}" if placement.after_deadline else ""
    return f"rank #{placement.rank}{among}"


def _guarantees(c: TaskCheck) -> str:
    """Which guarantees a task's ranked timings get, what does not hold, and what refuses it."""
    lines = [f"\n{c.name}: timed by {c.harness}:"]
    lines += [f"  ✓ {g}" for g in c.guarantees]
    if c.caveat:
        lines.append(
            textwrap.fill(c.caveat, TERMINAL_WIDTH, initial_indent="  ✗ ", subsequent_indent="    ")
        )
    if c.problem:
        lines.append(
            textwrap.fill(
                f"PROBLEM: {c.problem}",
                TERMINAL_WIDTH,
                initial_indent="  ✗ ",
                subsequent_indent="    ",
            )
        )
    return "\n".join(lines)


def format_task_checks(checks: Sequence[TaskCheck]) -> str:
    """`leaderboard check`'s table, then each task's first error in full."""

    def runs(c: TaskCheck) -> str:
        return "—" if not c.loaded else f"needs {c.needs}" if c.needs else "yes"

    def reference(c: TaskCheck) -> str:
        return "—" if c.passed is None else "passes" if c.passed else "FAILS"

    rows = [
        (
            c.name,
            "yes" if c.loaded else "NO",
            runs(c),
            reference(c),
            "—" if c.benchmark_s is None else format_duration_ns(c.benchmark_s * 1e9),
        )
        for c in checks
    ]
    parts = [format_table(("task", "loads", "runs here", "reference", "benchmark"), rows)]
    for c in checks:
        if c.error:
            label = "why it cannot run here" if c.needs else "first error"
            parts.append(f"\n{c.name}: {label}:\n" + textwrap.indent(c.error, "  "))
    parts.extend(_guarantees(c) for c in checks if c.harness)
    ok = sum(c.ok for c in checks)
    ran = sum(c.passed is not None for c in checks)
    parts.append(f"\n{ok} of {len(checks)} tasks fine ({ran} ran here)")
    return "\n".join(parts)
