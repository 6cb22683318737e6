"""Posting new leaders to a channel (`DISCORD_ANNOUNCE_CHANNEL_ID`): every `every_s` the
service says which leaderboards' top three changed; each change is one message. Which
changes were announced is kept in the database, so a restart repeats none."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

import discord

from cluster_manager.core.waits import within
from cluster_manager.rendering.reports import format_duration_ns
from cluster_manager.service.announcements import LeadersChanged

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot

log = logging.getLogger(__name__)
MEDALS = ("🥇", "🥈", "🥉")


def who(user: str) -> str:
    """A Discord user as a mention (shown as their name, pinging nobody), others by name."""
    return f"<@{user}>" if user.isdigit() else user


def announcement(change: LeadersChanged) -> str:
    lines = [f"🏆 New leaders on **{change.leaderboard}** ({change.gpu})"]
    for medal, entry in zip(MEDALS, change.now, strict=False):
        lines.append(f"{medal} {who(entry.user)} · {format_duration_ns(entry.score * 1e9)}")
    if change.now and change.before[:1] != [change.now[0].user] and change.before:
        lines.append(f"{who(change.now[0].user)} takes first place from {who(change.before[0])}.")
    return "\n".join(lines)


class Announcer:
    def __init__(self, bot: ClusterBot, channel_id: int, every_s: float, min_gap_s: float):
        self.bot = bot
        self.channel_id = channel_id
        self.every_s = every_s
        self.min_gap = timedelta(seconds=min_gap_s)

    async def announce_once(self) -> int:
        """Posts each change of leaders since the last time; how many were posted."""
        changes = await self.bot.app.service.announcements.leader_changes(self.min_gap)
        channel = self.bot.get_partial_messageable(self.channel_id)
        for change in changes:
            await channel.send(
                announcement(change), allowed_mentions=discord.AllowedMentions.none()
            )
        return len(changes)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.announce_once()
            except Exception:  # a database or Discord blip: try again next round
                log.exception("announcing new leaders failed")
            await within(self.every_s, stop.wait())
