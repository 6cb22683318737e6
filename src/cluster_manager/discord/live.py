"""Following a submission: one status message edited as its jobs move, then the report.

The jobs run in a scheduler elsewhere (the bot's own, or a worker); this only listens to the
service's events. Interaction tokens expire after 15 minutes, so a long wait continues in a
message of the bot's own in the channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import discord

from cluster_manager.core.models import Mode
from cluster_manager.core.records import EventState, JobEvent, JobState
from cluster_manager.discord import profile_files, render
from cluster_manager.discord.replies import answer, text_file, truncate
from cluster_manager.report import format_submission_report
from cluster_manager.service import TERMINAL_EVENTS, Service, SubmissionReceipt

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
            return f"🚀 {label}: sent to the {event.detail or 'runner'} launcher"
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
        lines = [job_line(self.jobs[k]) for k in sorted(self.jobs)]
        if self.finished_at is not None:
            tail = f"🏁 Done in {self.finished_at - self.started:.1f} s."
        else:
            tail = f"⏱️ {now - self.started:.0f} s so far"
        return truncate("\n".join([head, *lines, tail]), MESSAGE_LIMIT)


class LiveMessage:
    """A message edited at most every `interval` seconds (Discord rate-limits edits)."""

    def __init__(
        self, interaction: discord.Interaction, message: discord.abc.Snowflake, interval: float
    ) -> None:
        self.interaction = interaction
        self.message: Any = message
        self.interval = interval
        self.last_text = ""
        self.last_edit = 0.0
        self.moved = False

    async def show(self, text: str) -> None:
        if text == self.last_text:
            return
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self.last_edit + self.interval - loop.time()))
        try:
            await self.message.edit(content=text)
        except discord.HTTPException as exc:
            if self.moved or exc.status not in (401, 404):
                raise
            # The interaction token expired: carry on in a message of the bot's own.
            log.info("interaction expired; following submission in the channel instead")
            self.message = await self.fallback(content=text)
            self.moved = True
        self.last_text = text
        self.last_edit = loop.time()

    async def fallback(self, **kwargs: Any) -> discord.Message:
        channel = self.interaction.channel
        if not isinstance(channel, discord.abc.Messageable):
            raise RuntimeError("the interaction has no channel to continue in")
        return await channel.send(**kwargs)


class Watchers:
    """Where job events come from. A live watch holds a pooled connection for as long as it
    lasts, so at most `limit` run at once; submissions followed beyond that poll instead."""

    def __init__(self, limit: int, poll_interval: float) -> None:
        self.limit = limit
        self.poll_interval = poll_interval
        self._slots = asyncio.Semaphore(limit)

    async def events(self, service: Service, submission_id: int) -> AsyncIterator[JobEvent]:
        if self.limit > 0 and not self._slots.locked():
            async with self._slots:
                async for event in service.watch(submission_id):
                    yield event
            return
        async for event in self._poll(service, submission_id):
            yield event

    async def _poll(self, service: Service, submission_id: int) -> AsyncIterator[JobEvent]:
        while True:
            report = await service.report(submission_id)
            verdicts = {r.job_id: r.verdict.value for r in report.runs}
            for job in report.jobs:
                yield JobEvent.of_job(job, verdict=verdicts.get(job.id))
            if report.done:
                return
            await asyncio.sleep(self.poll_interval)


async def follow_submission(
    interaction: discord.Interaction,
    service: Service,
    receipt: SubmissionReceipt,
    *,
    watchers: Watchers,
    edit_interval: float,
) -> None:
    loop = asyncio.get_running_loop()
    status = LiveSubmission(receipt, interaction.user.mention, started=loop.time())
    for job in receipt.jobs:
        status.apply(JobEvent.of_job(job))
    first = await answer(interaction, content=status.render(loop.time()))
    live = LiveMessage(interaction, first, edit_interval)
    live.last_text, live.last_edit = first.content, loop.time()
    async for event in watchers.events(service, receipt.submission_id):
        status.apply(event)
        if status.done and status.finished_at is None:
            status.finished_at = loop.time()
        await live.show(status.render(loop.time()))
    if status.finished_at is None:
        status.finished_at = loop.time()
        await live.show(status.render(loop.time()))

    report = await service.report(receipt.submission_id)
    placements = []
    if receipt.mode is Mode.LEADERBOARD and any(j.state is JobState.FINISHED for j in report.jobs):
        placements = await service.placements(receipt.submission_id)
    embed = render.report_embed(report, placements)
    log_text = format_submission_report(report, with_output=True) + "\n"
    name = f"submission-{receipt.submission_id}.txt"

    def files() -> list[discord.File]:  # a file can be sent once only: each try gets its own
        return [text_file(name, log_text), *profile_files.report_files(report)]

    if not live.moved:
        try:
            await answer(interaction, embed=embed, files=files())
            return
        except discord.HTTPException as exc:
            if exc.status not in (401, 404):
                raise
    await live.fallback(content=interaction.user.mention, embed=embed, files=files())
