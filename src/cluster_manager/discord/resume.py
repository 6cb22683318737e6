"""After a restart, the submissions an earlier bot process was following and had not
reported: each goes on in a direct message to its submitter (or the channel says where its
report will be), and its report is sent when it is done."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import discord

from cluster_manager.core.records import JobEvent
from cluster_manager.discord.live import LiveMessage, LiveSubmission, carry_on
from cluster_manager.service import NotFoundError, SubmissionReceipt

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot

log = logging.getLogger(__name__)

RESUMED = "🔁 The bot restarted: this submission's status goes on here."


async def resume_follows(bot: ClusterBot) -> list[asyncio.Task[None]]:
    """Starts a follow of its own for each unreported submission; each ends with its report."""
    follows = await bot.app.service.follows.unreported()
    if follows:
        log.info("taking up %d follow(s) left by an earlier bot process", len(follows))
    return [
        asyncio.create_task(_resume(bot, f.submission_id, f.member_id, f.channel_id))
        for f in follows
    ]


async def _resume(bot: ClusterBot, submission_id: int, member_id: int, channel_id: int) -> None:
    service = bot.app.service
    try:
        report = await service.submissions.report(submission_id)
        member = await bot.fetch_user(member_id)
    except (NotFoundError, discord.NotFound):  # deleted since, or the member is gone
        await service.follows.reported(submission_id)
        return
    sub = report.submission
    receipt = SubmissionReceipt(
        sub.id,
        sub.leaderboard,
        sub.user,
        sub.file_name,
        sub.mode,
        report.jobs,
        after_deadline=sub.after_deadline,
    )
    loop = asyncio.get_running_loop()
    status = LiveSubmission(receipt, member.mention, started=loop.time(), note=RESUMED)
    for job in report.jobs:
        status.apply(JobEvent.of_job(job))
    live = LiveMessage(
        None,
        bot.config.edit_interval,
        member=member,
        channel=await _channel(bot, channel_id),
        submission_id=submission_id,
    )
    try:
        await carry_on(live, status, service)
    except Exception:  # one follow's trouble is logged; the others go on
        log.exception("resumed follow of submission %s failed", submission_id)


async def _channel(bot: ClusterBot, channel_id: int) -> Any:
    found = bot.get_channel(channel_id)
    if found is None:
        with contextlib.suppress(discord.HTTPException):
            found = await bot.fetch_channel(channel_id)
    return found if isinstance(found, discord.abc.Messageable) else None
