"""Embeds and attachments for what the service returns. Pure functions: no I/O here."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TypeVar

import discord

from cluster_manager.core.models import Mode
from cluster_manager.core.records import (
    JobState,
    LeaderboardSummary,
    Placement,
    RankingEntry,
    RunRecord,
)
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.submission import in_own_names
from cluster_manager.core.teams import Team
from cluster_manager.core.telemetry import summary_line
from cluster_manager.core.verdicts import headline
from cluster_manager.discord.replies import MESSAGE_CHARS, code_block, truncate
from cluster_manager.rendering.reports import (
    ENDED,
    INVITE_ONLY,
    counted,
    format_duration_ns,
    format_placement,
    format_time_left,
    pair_score,
)
from cluster_manager.rendering.speed import speed_summary
from cluster_manager.service import SubmissionReport

PAGE_SIZE = 10
FIELD_LIMIT = 1024  # characters in one embed field
TITLE_LIMIT = 256
DESCRIPTION_LIMIT = 4096
EMBED_BUDGET = 4000  # of Discord's 6000 per embed, leaving room for the summary fields
PASSED_COLOR = discord.Color.green()
FAILED_COLOR = discord.Color.red()
INFO_COLOR = discord.Color.blurple()
MODE_LABELS = {
    Mode.TEST: "test",
    Mode.BENCHMARK: "benchmark",
    Mode.LEADERBOARD: "ranked",
    Mode.PROFILE: "profile",
}
T = TypeVar("T")
# The submitter's status and report of a run after the deadline say where it ranks.
AFTER_DEADLINE_NOTE = (
    "⏰ After the deadline: this run ranks only among the runs after the deadline "
    "(`/leaderboard show after_deadline:True`), never in the competition's ranking."
)


def icon(passed: bool) -> str:
    return "✅" if passed else "❌"


def user_label(external_id: str, name: str = "") -> str:
    """Who a user is, by the name stored with them: a mention of a Discord id shows as a raw
    id to members whose client has not loaded that member (large servers). Without a stored
    name, a Discord id is a mention and anyone else (CLI users) their id."""
    if name:
        return discord.utils.escape_markdown(name)
    if external_id.isdigit():
        return f"<@{external_id}>"
    return discord.utils.escape_markdown(external_id)


def seconds(score: float | None) -> str:
    return "-" if score is None else format_duration_ns(score * 1e9)


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def number_pages(pages: list[discord.Embed]) -> list[discord.Embed]:
    if len(pages) > 1:
        for i, page in enumerate(pages, 1):
            page.set_footer(text=f"Page {i}/{len(pages)}")
    return pages


def _line_pages(title: str, lines: Sequence[str], *, empty: str) -> list[discord.Embed]:
    groups = chunks(lines, PAGE_SIZE) or [[empty]]
    return [
        discord.Embed(
            title=title,
            description=truncate("\n".join(group), DESCRIPTION_LIMIT),
            color=INFO_COLOR,
        )
        for group in groups
    ]


# --- leaderboards ----------------------------------------------------------------------------


def leaderboard_pages(boards: Sequence[LeaderboardSummary], now: datetime) -> list[discord.Embed]:
    lines = []
    for b in boards:
        left = format_time_left(b.deadline, now)
        when = discord.utils.format_dt(b.deadline, "f")
        deadline = f"{ENDED} {when}" if left == ENDED else f"ends {when} ({left} left)"
        access = f" · {INVITE_ONLY}" if b.invite_only else ""
        lines.append(
            f"**{b.name}** · {', '.join(b.gpus)} · {deadline}{access} · "
            f"{counted(b.submissions, 'submission')}"
        )
    return number_pages(_line_pages("Leaderboards", lines, empty="No leaderboards yet."))


def ranking_pages(
    name: str, rankings: dict[str, list[RankingEntry]], *, after_deadline: bool = False
) -> list[discord.Embed]:
    """The competition's ranking per GPU, or with `after_deadline` that of the runs after the
    deadline, titled so that nobody takes one for the other."""
    tab = " — runs after the deadline" if after_deadline else ""
    empty = (
        "No run after the deadline is ranked yet."
        if after_deadline
        else "No ranked submissions yet."
    )
    pages: list[discord.Embed] = []
    for gpu, entries in rankings.items():
        lines = [
            f"`#{e.rank}` {_entrant(e)} · **{seconds(e.score)}** · "
            f"submission {e.submission_id} · {discord.utils.format_dt(e.submitted_at, 'd')}"
            for e in entries
        ]
        pages += _line_pages(f"🏆 {name} on {gpu}{tab}", lines, empty=empty)
    return number_pages(pages)


def _entrant(entry: RankingEntry) -> str:
    """Who an entry is: a team's entry names the team and the member whose run is its best."""
    user = user_label(entry.user, entry.name)
    if entry.team is None:
        return user
    return f"**{discord.utils.escape_markdown(entry.team)}** ({user})"


def personal_pages(name: str, runs: Sequence[RunRecord]) -> list[discord.Embed]:
    lines = [
        f"#{r.submission_id} `{r.file_name}` · {r.gpu}{' (secret)' if r.secret else ''} · "
        f"{MODE_LABELS[r.mode]} · {icon(r.passed)} {r.verdict.value}"
        + (f" · {seconds(r.score)}" if r.score is not None and not r.secret else "")
        + f" · {discord.utils.format_dt(r.created_at, 'R')}"
        for r in reversed(runs)  # newest first
    ]
    return number_pages(
        _line_pages(f"Your runs on {name}", lines, empty=f"You have no runs on {name} yet.")
    )


# --- teams -----------------------------------------------------------------------------------


def _fitting_pages(title: str, lines: Sequence[str], *, empty: str) -> list[discord.Embed]:
    """Pages of at most PAGE_SIZE lines whose text fits a description: a team's line of 100
    members is long, so pages hold fewer of those."""
    groups: list[list[str]] = []
    size = 0
    for line in (truncate(li, DESCRIPTION_LIMIT) for li in lines):
        if not groups or len(groups[-1]) == PAGE_SIZE or size + 1 + len(line) > DESCRIPTION_LIMIT:
            groups.append([])
            size = -1
        groups[-1].append(line)
        size += 1 + len(line)
    return (
        _line_pages(title, [], empty=empty)
        if not groups
        else [
            discord.Embed(title=title, description="\n".join(group), color=INFO_COLOR)
            for group in groups
        ]
    )


def team_pages(team: Team) -> list[discord.Embed]:
    """A team and its members, in the order they joined."""
    title = f"👥 {team.name} on {team.leaderboard} ({len(team.members)}/{team.size_limit})"
    lines = [f"{i}. {user_label(m)}" for i, m in enumerate(team.members, 1)]
    return number_pages(_fitting_pages(title, lines, empty="No members."))


def teams_pages(leaderboard: str, teams: Sequence[Team]) -> list[discord.Embed]:
    """Every team on a leaderboard, a line each with its members."""
    lines = [
        f"**{discord.utils.escape_markdown(t.name)}** ({len(t.members)}/{t.size_limit}): "
        + ", ".join(user_label(m) for m in t.members)
        for t in teams
    ]
    empty = f"No teams on {leaderboard} yet: `/team create` starts one."
    return number_pages(_fitting_pages(f"👥 Teams on {leaderboard}", lines, empty=empty))


# --- submissions -----------------------------------------------------------------------------


def _run_lines(result: RunResult) -> list[str]:
    lines = []
    for t in result.tests:
        detail = "" if t.passed else f": {headline(t.error or t.message)}"
        lines.append(f"{icon(t.passed)} {t.spec}{detail}")
    for b in result.benchmarks:
        if b.passed and b.report:
            lines.append(f"📊 {b.spec}: profile in the attached log")
        elif b.passed and b.runs:
            timing = f"{format_duration_ns(b.mean)} ± {format_duration_ns(b.err)}"
            speed = f" · {speed_summary(b.speed)}" if b.speed is not None else ""
            lines.append(f"⏱️ {b.spec}: {timing}{speed}")
        elif b.skipped:
            lines.append(f"⏭️ {b.spec}: {b.error}")
        elif not b.passed:
            lines.append(f"❌ {b.spec}: {headline(b.error) or 'failed'}")
    for phase in result.phases:
        if phase.profiler is not None:  # an ncu report, or why the torch profiler was used
            lines.append(f"🔬 {phase.profiler.summary()}")
    if gpu_line := summary_line(result.telemetry):
        lines.append(f"🌡️ {gpu_line}")
    if result.score is not None:
        lines.append(f"🏁 Score: **{seconds(result.score)}**")
    if result.review:
        lines.append(f"⚠️ {result.review}")
    if not result.passed and result.message:
        lines.append((result.message.strip().splitlines() or [""])[-1])
    return lines


# What a run's line says of an Nsight Compute report the message could not hold.
LEFT_OUT = (
    "Nsight Compute report not attached: over Discord's 8 MiB for a message's files "
    "(the API's profile zip holds it)"
)


def report_embed(
    report: SubmissionReport, placements: Sequence[Placement], left_out: Collection[str] = ()
) -> discord.Embed:
    """The report as Discord shows it; `left_out`: GPUs whose profile report did not fit."""
    sub = report.submission
    passed = report.passed
    failing = next((r.verdict.value for r in report.runs if not r.passed), "failed")
    embed = discord.Embed(
        title=f"{icon(passed)} Submission #{sub.id}: {'passed' if passed else failing}",
        description=(
            f"`{sub.file_name}` on **{sub.leaderboard}** · {MODE_LABELS[sub.mode]} · "
            f"by {user_label(sub.user)}"
            + (f"\n{AFTER_DEADLINE_NOTE}" if sub.after_deadline else "")
        ),
        color=PASSED_COLOR if passed else FAILED_COLOR,
    )
    public = [r for r in report.runs if not r.secret]
    for i, run in enumerate(public):
        result = RunResult.from_json(run.result) if run.result else None
        # Its errors name the author's file, not the runner's name for it (`submission.py`).
        lines = [in_own_names(ln, run.file_name) for ln in _run_lines(result)] if result else []
        if run.gpu in left_out:
            attached = "🔬 Nsight Compute report attached"
            lines = [f"🔬 {LEFT_OUT}" if ln.startswith(attached) else ln for ln in lines]
        value = truncate("\n".join(lines) or "-", FIELD_LIMIT)
        if len(embed) + len(value) > EMBED_BUDGET:  # Discord refuses embeds over 6000
            embed.add_field(
                name="More runs", value=f"{len(public) - i} more in the attached log", inline=False
            )
            break
        embed.add_field(
            name=f"{icon(run.passed)} {run.gpu}: {run.verdict.value}", value=value, inline=False
        )
    secret = [
        f"{icon(r.passed)} {r.gpu}: {r.verdict.value}"
        + (f" — {r.result['held']}" if r.result.get("held") else "")
        for r in report.runs
        if r.secret
    ]
    if secret:
        embed.add_field(name="Secret re-runs", value="\n".join(secret), inline=False)
    failed = [
        f"❌ {j.gpu}{' (secret)' if j.secret else ''}: {j.error or 'failed'}"
        for j in report.jobs
        if j.state is JobState.FAILED
    ]
    if failed:
        embed.add_field(
            name="Failed jobs", value=truncate("\n".join(failed), FIELD_LIMIT), inline=False
        )
    if placements:
        embed.add_field(
            name="Ranking",
            value=truncate("\n".join(format_placement(p) for p in placements), FIELD_LIMIT),
            inline=False,
        )
    embed.set_footer(text="The full log is attached.")
    return embed


def channel_line(report: SubmissionReport, placements: Sequence[Placement], name: str) -> str:
    """What the channel sees of a submission its leaderboard's channel policy publishes:
    whose, its mode, whether it passed and, ranked, its places; never its output or what
    failed (a secret run's kind is its author's business)."""
    sub = report.submission
    head = (
        f"{icon(report.passed)} **{discord.utils.escape_markdown(name)}**'s "
        f"{MODE_LABELS[sub.mode]} submission #{sub.id} to **{sub.leaderboard}**"
    )
    if not report.passed:
        return f"{head} did not pass."
    places = [
        f"{p.gpu} rank #{p.rank} with {pair_score(p.score, 'its')}"
        + (", a new personal best" if p.improved else "")
        for p in placements
        if p.rank is not None and p.score is not None
    ]
    line = f"{head} passed" + (f": {'; '.join(places)}." if places else ".")
    return truncate(line, MESSAGE_CHARS)  # a place per GPU of the leaderboard


# --- script runs (`/run`) -------------------------------------------------------------------


def script_embed(file_name: str, gpu: str, result: RunResult) -> discord.Embed:
    phase = result.phases[0] if result.phases else None
    took = f" in {phase.duration_s:.1f} s" if phase else ""
    name = truncate(file_name, TITLE_LIMIT // 2, marker="…")  # a file's name may be long
    title = f"{icon(result.passed)} {name} on {gpu}: {result.verdict.value}{took}"
    embed = discord.Embed(
        title=truncate(title, TITLE_LIMIT, marker="…"),
        color=PASSED_COLOR if result.passed else FAILED_COLOR,
    )
    if not result.passed and result.message:
        embed.description = truncate(result.message, 1000)
    if phase is not None:
        embed.add_field(name="stdout", value=code_block(phase.stdout), inline=False)
        if phase.stderr.strip():
            embed.add_field(name="stderr", value=code_block(phase.stderr), inline=False)
    embed.set_footer(text="The complete output is attached.")
    return embed


def script_output(result: RunResult) -> str:
    parts = [f"verdict: {result.verdict.value}", result.message]
    for phase in result.phases:
        parts += [f"--- stdout ({phase.name}) ---", phase.stdout, f"--- stderr ({phase.name}) ---"]
        parts.append(phase.stderr)
    return "\n".join(parts) + "\n"
