"""The bot: an `App` opened elsewhere, the cogs over its service, and a scheduler of its own.

    async with open_app(settings) as app:
        async with ClusterBot(app, BotConfig(guild_id=...)) as bot:
            await bot.start(token)

Built without an app, it still has every command (to print them), but cannot run any.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.app import App
from cluster_manager.discord.announcer import Announcer
from cluster_manager.discord.cogs.account import AccountCog
from cluster_manager.discord.cogs.admin import AdminCog
from cluster_manager.discord.cogs.leaderboard import LeaderboardCog
from cluster_manager.discord.cogs.ops import OpsCog
from cluster_manager.discord.cogs.run import RunCog
from cluster_manager.discord.cogs.team import TeamCog
from cluster_manager.discord.error_handlers import report_error
from cluster_manager.discord.resume import resume_follows
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BotConfig:
    # Commands are registered in this guild (instant) instead of globally (up to an hour).
    guild_id: int | None = None
    # Sync the command tree with Discord at start-up.
    sync_commands: bool = False
    # Run the scheduler in the bot; off when `cluster-manager worker`s serve the queue.
    run_scheduler: bool = True
    scheduler: SchedulerConfig | None = None
    edit_interval: float = 1.0  # seconds between edits of a live status message
    view_timeout: float = 180.0  # seconds menus and buttons wait for their user
    # New leaders are posted here (a channel id); None announces nothing.
    announce_channel_id: int | None = None
    announce_every_s: float = 30.0
    announce_min_gap_s: float = 300.0  # per leaderboard and GPU


class ClusterTree(app_commands.CommandTree):
    async def on_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        await report_error(interaction, error)


class ClusterBot(commands.Bot):
    def __init__(self, app: App | None, config: BotConfig | None = None, **options: Any) -> None:
        # No voice here: skip discord.py's warnings about missing voice libraries.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        super().__init__(
            command_prefix=commands.when_mentioned,  # slash commands only; no message content
            intents=discord.Intents.default(),
            help_command=None,
            tree_cls=ClusterTree,
            allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=True),
            **options,
        )
        self._app = app
        self.config = config or BotConfig()
        self._stop = asyncio.Event()
        self._scheduler_task: asyncio.Task[None] | None = None
        self._announcer_task: asyncio.Task[None] | None = None
        self.announcer: Announcer | None = None
        if self.config.announce_channel_id is not None:
            self.announcer = Announcer(
                self,
                self.config.announce_channel_id,
                self.config.announce_every_s,
                self.config.announce_min_gap_s,
            )
        self._cogs_loaded = False
        self._resumed: list[asyncio.Task[None]] = []

    @property
    def app(self) -> App:
        if self._app is None:
            raise RuntimeError("this bot was built without an app: it can only list commands")
        return self._app

    async def load_cogs(self) -> None:
        if self._cogs_loaded:
            return
        cogs = (
            LeaderboardCog(self),
            RunCog(self),
            OpsCog(self),
            AccountCog(self),
            TeamCog(self),
            AdminCog(self),
        )
        for cog in cogs:
            await self.add_cog(cog)
        self._cogs_loaded = True

    def command_payload(self) -> list[dict[str, Any]]:
        """The commands as they are synced to Discord."""
        return [command.to_dict(self.tree) for command in self.tree.get_commands()]

    async def setup_hook(self) -> None:
        await self.load_cogs()
        if self.config.guild_id is not None:
            self.tree.copy_global_to(guild=discord.Object(self.config.guild_id))
        if self.config.sync_commands:
            synced = await self.sync_commands()
            log.info("synced %d commands", len(synced))
        if self.config.run_scheduler:
            self._scheduler_task = asyncio.create_task(
                keep_scheduling(self.app.scheduler, self._stop, self.config.scheduler),
                name="scheduler",
            )
        if self.announcer is not None:
            self._announcer_task = asyncio.create_task(
                self.announcer.run(self._stop), name="announcer"
            )
        # Follows an earlier process of the bot left unreported (a restart mid-run).
        self._resumed = await resume_follows(self)

    async def sync_commands(self) -> list[app_commands.AppCommand]:
        guild = discord.Object(self.config.guild_id) if self.config.guild_id else None
        return await self.tree.sync(guild=guild)

    async def close(self) -> None:
        self._stop.set()
        for task in self._resumed:  # left unreported: the next start takes them up again
            task.cancel()
        await asyncio.gather(*self._resumed, return_exceptions=True)
        if self._announcer_task is not None:
            await self._announcer_task
            self._announcer_task = None
        if self._scheduler_task is not None:
            await stop_scheduling(self._scheduler_task, self._stop)
            self._scheduler_task = None
        await super().close()

    async def on_ready(self) -> None:
        user_id = self.user.id if self.user else None  # set once logged in
        log.info("logged in as %s (%s) in %d guild(s)", self.user, user_id, len(self.guilds))
