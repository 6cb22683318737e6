"""Following a submission: one status message edited as its jobs move, then the report.

Both are the submitter's own (ephemeral): its output, files and profiles are nobody else's
business. The channel sees only what the competition publishes, as the leaderboard's channel
policy says (`ChannelPolicy`): by default a ranked submission's verdict and placement, in one
line; or nothing; or every submission's verdict line. A run after the deadline is no part of
the competition: the channel sees nothing of it. The jobs run in a scheduler elsewhere
(the bot's own, or a worker); this only listens to the service's events. Interaction tokens
expire after 15 minutes, so a long wait continues in a direct message; a member who takes
none is told once, in the channel, where the report will be (`/leaderboard get-submission`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import discord
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from cluster_manager.core.models import Mode
from cluster_manager.core.records import EventState, JobEvent, JobState
from cluster_manager.core.waits import within
from cluster_manager.core.wording import dispatched_to
from cluster_manager.discord import profile_files, render
from cluster_manager.discord.replies import answer, text_file, truncate
from cluster_manager.rendering.reports import format_submission_report
from cluster_manager.service import (
    TERMINAL_EVENTS,
    NotFoundError,
    Service,
    SubmissionReceipt,
    SubmissionReport,
)

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000  # characters in a message's content
PHASES = {
    "test": "running tests",
    "benchmark": "benchmarking",
    "leaderboard": "running the ranked benchmarks",
    "profile": "profiling",
    "script": "running the script",
}


def job_line(event: JobEvent) -> str:
    label = f"**{event.gpu}**" + (" secret re-run" if event.secret else "")
    match event.state:
        case EventState.QUEUED:
            where = f", position {event.position}" if event.position else ""
            return f"⏳ {label}: queued{where}"
        case EventState.CLAIMED:
            return f"⏳ {label}: starting"
        case EventState.DISPATCHED:
            return f"🚀 {label}: {dispatched_to(event.detail)}"
        case EventState.RUNNING:
            phase, _, cases = event.detail.partition(":")
            doing = PHASES.get(phase.strip(), f"running {phase.strip()}")
            return f"⚙️ {label}: {doing}" + (f" ({cases.strip()})" if cases.strip() else "")
        case EventState.FINISHED:
            return f"{render.icon(event.verdict == 'passed')} {label}: {event.verdict}"
        case EventState.FAILED:
            why = f": {truncate(event.detail, 300)}" if event.detail else ""
            return f"❌ {label}: failed{why}"
    return f"{label}: {event.state}"


@dataclass
class LiveSubmission:
    receipt: SubmissionReceipt
    author: str
    started: float
    jobs: dict[int, JobEvent] = field(default_factory=dict)
    finished_at: float | None = None
    note: str = ""  # a line under the head (a follow taken up after a restart)

    def apply(self, event: JobEvent) -> None:
        self.jobs[event.job_id] = event

    @property
    def done(self) -> bool:
        return bool(self.jobs) and all(e.state in TERMINAL_EVENTS for e in self.jobs.values())

    def render(self, now: float) -> str:
        r = self.receipt
        head = (
            f"📨 Submission **#{r.submission_id}** · `{r.file_name}` → **{r.leaderboard}** · "
            f"{render.MODE_LABELS[r.mode]} · by {self.author}"
        )
        lines = [self.note] if self.note else []
        if r.after_deadline:
            lines.append(render.AFTER_DEADLINE_NOTE)
        lines += [job_line(self.jobs[k]) for k in sorted(self.jobs)]
        if self.finished_at is not None:
            tail = f"🏁 Done in {self.finished_at - self.started:.1f} s."
        else:
            tail = f"⏱️ {now - self.started:.0f} s so far"
        return truncate("\n".join([head, *lines, tail]), MESSAGE_LIMIT)


# Sends a private message while the command's interaction lives (an ephemeral followup).
Followup = Callable[..., Awaitable[Any]]


class LiveMessage:
    """The submitter's status, edited at most every `interval` seconds (Discord rate-limits
    edits): an ephemeral followup while the command's interaction lives (`followup`), then a
    direct message; where the member takes none, one note in `channel` says where the report
    will be."""

    def __init__(
        self,
        message: discord.abc.Snowflake | None,
        interval: float,
        *,
        member: discord.User | discord.Member,
        channel: discord.abc.Messageable | None,
        submission_id: int,
        followup: Followup | None = None,
    ) -> None:
        self.message: Any = message
        self.interval = interval
        self.member = member
        self.channel = channel
        self.submission_id = submission_id
        self.followup = followup
        self.last_text = ""
        self.last_edit = 0.0
        self.moved = followup is None  # a direct message (once there is one)
        self.lost = False  # no private place left: the member takes no direct messages

    async def show(self, text: str | Callable[[], str], *, final: bool = False) -> None:
        """Edits the status to `text`, made (when a callable) once the edit interval allows,
        so that whatever happened meanwhile goes into one edit. A `final` one (the end state)
        is tried again through Discord's trouble, where others are skipped."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self.last_edit + self.interval - loop.time()))
        text = text() if callable(text) else text
        if text == self.last_text or self.lost:
            return
        try:
            if self.message is None:
                await self.move(content=text)
            elif final:
                async for attempt in _retrying():
                    with attempt:
                        await self.message.edit(content=text)
            else:
                await self.message.edit(content=text)
        except discord.HTTPException as exc:
            if passing(exc) and not final:
                # Discord's trouble, not the follow's: this edit is skipped, the next event's
                # (or the final one) shows the state then.
                log.warning("status edit skipped (Discord answered %s)", exc.status)
                return
            if self.moved or exc.status not in (401, 404):
                raise
            log.info("interaction expired; following the submission in a direct message")
            await self.move(content=text)
        self.last_text = text
        self.last_edit = loop.time()

    async def move(self, **kwargs: Any) -> None:
        """Carries on in a direct message; where the member takes none, says so in the channel
        once (the submission goes on, and its report can be fetched)."""
        self.moved = True
        try:
            self.message = await self.member.send(**kwargs)
        except discord.Forbidden:
            self.lost = True
            await self.channel_note()

    async def deliver(self, message: Callable[[], dict[str, Any]]) -> None:
        """The report, privately: as a followup while the interaction lives, else by DM.
        `message` makes the message's arguments anew for each try (a file is sent once)."""
        if not self.moved and self.followup is not None:
            try:
                async for attempt in _retrying():
                    with attempt:
                        await self.followup(ephemeral=True, **message())
                return
            except discord.HTTPException as exc:
                if exc.status not in (401, 404) and not passing(exc):
                    raise
            await self.move(**message())
        elif not self.lost:
            try:
                await self.member.send(**message())
            except discord.Forbidden:
                self.lost = True
                await self.channel_note()

    async def channel_note(self) -> None:
        await self.public(
            content=(
                f"{self.member.mention}: your submission's private status cannot go on here "
                "(Discord ends a command's after 15 minutes, or the bot restarted) and you take "
                f"no direct messages from the bot. It goes on: `/leaderboard get-submission "
                f"{self.submission_id}` shows its report."
            ),
            allowed_mentions=discord.AllowedMentions(users=[self.member]),
        )

    async def public(self, **kwargs: Any) -> None:
        if self.channel is None:
            log.warning("submission %s: no channel to write in", self.submission_id)
            return
        await self.channel.send(**kwargs)


# The report is worth waiting for: Discord's 5xx storms pass within a minute or two (each
# request already retried five times by discord.py), and a 429 says when to come back.
REPORT_ATTEMPTS = 5
FIRST_WAIT_S = 2.0  # then twice as long each time, up to
LONGEST_WAIT_S = 60.0


def passing(exc: discord.HTTPException) -> bool:
    """Trouble on Discord's side that passes: a server error, or a rate limit."""
    return exc.status >= 500 or exc.status == 429


def _retrying() -> AsyncRetrying:
    return AsyncRetrying(
        retry=retry_if_exception(lambda e: isinstance(e, discord.HTTPException) and passing(e)),
        wait=wait_exponential(multiplier=FIRST_WAIT_S, max=LONGEST_WAIT_S),
        stop=stop_after_attempt(REPORT_ATTEMPTS),
        reraise=True,
    )


async def follow_submission(
    interaction: discord.Interaction,
    service: Service,
    receipt: SubmissionReceipt,
    *,
    edit_interval: float,
) -> None:
    """Follows a submission just made with a command: its status, then its report."""
    loop = asyncio.get_running_loop()
    channel = interaction.channel
    await service.follows.started(
        receipt.submission_id, interaction.user.id, interaction.channel_id or 0
    )
    status = LiveSubmission(receipt, interaction.user.mention, started=loop.time())
    for job in receipt.jobs:
        status.apply(JobEvent.of_job(job))
    first = None
    async for attempt in _retrying():
        with attempt:
            first = await answer(interaction, content=status.render(loop.time()), ephemeral=True)
    assert first is not None
    live = LiveMessage(
        first,
        edit_interval,
        member=interaction.user,
        channel=channel if isinstance(channel, discord.abc.Messageable) else None,
        submission_id=receipt.submission_id,
        followup=functools.partial(answer, interaction),
    )
    live.last_text, live.last_edit = first.content, loop.time()
    await carry_on(live, status, service)


async def carry_on(live: LiveMessage, status: LiveSubmission, service: Service) -> None:
    """Shows `status` as the submission's jobs move, then sends its report (privately) and,
    where the leaderboard's channel policy publishes it, the line the channel sees; the follow
    is then done."""
    loop = asyncio.get_running_loop()
    submission_id = status.receipt.submission_id
    changed, over = asyncio.Event(), asyncio.Event()
    painter = asyncio.create_task(_paint(live, status, changed, over))
    try:
        # Every follow of the process shares one database listener (`service.events.watch`).
        async for event in service.events.watch(submission_id):
            status.apply(event)
            if status.done and status.finished_at is None:
                status.finished_at = loop.time()
            changed.set()
    finally:
        # Told, not cancelled: an edit under way ends whole.
        over.set()
        changed.set()
        await painter
    if status.finished_at is None:
        status.finished_at = loop.time()
    await live.show(status.render(loop.time()), final=True)  # unless it is shown already

    report = await service.submissions.report(submission_id)
    placements = []
    ranked = status.receipt.mode is Mode.LEADERBOARD
    if ranked and any(j.state is JobState.FINISHED for j in report.jobs):
        placements = await service.submissions.placements(submission_id)
    embed = render.report_embed(report, placements, profile_files.left_out(report))
    await live.deliver(lambda: {"embed": embed, "files": report_files(report)})
    if await _published(service, report):  # what the competition publishes
        await live.public(
            content=render.channel_line(report, placements, live.member.display_name),
            allowed_mentions=discord.AllowedMentions.none(),
        )
    await service.follows.reported(submission_id)


async def _published(service: Service, report: SubmissionReport) -> bool:
    """Whether the channel sees the submission's verdict: its leaderboard's channel policy,
    read now (a policy set while it ran holds), says so; never of a run after the deadline,
    which is no part of the competition."""
    if report.submission.after_deadline:
        return False
    try:
        board = await service.leaderboards.get(report.submission.leaderboard)
    except NotFoundError:  # deleted since: nothing to publish
        return False
    return board.publishes(report.submission.mode)


# How often the elapsed time moves on a status whose jobs say nothing new.
TICK_S = 10.0


async def _paint(
    live: LiveMessage, status: LiveSubmission, changed: asyncio.Event, over: asyncio.Event
) -> None:
    """Shows the status as its jobs move, and every `TICK_S` the time it has taken, until
    `over`: events that arrive within one edit interval go into one edit (Discord rate-limits
    edits)."""
    loop = asyncio.get_running_loop()
    while not over.is_set():
        await within(TICK_S, changed.wait())
        changed.clear()
        if not over.is_set():
            await live.show(lambda: status.render(loop.time()))


def report_files(report: SubmissionReport) -> list[discord.File]:
    """The full log and the profiles' files (a file can be sent once: each send makes its
    own)."""
    log_text = format_submission_report(report, with_output=True) + "\n"
    name = f"submission-{report.submission.id}.txt"
    return [text_file(name, log_text), *profile_files.report_files(report)]
