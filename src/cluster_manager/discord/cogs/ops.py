"""Operations: `/ping`, `/queue`, `/verifydb`, `/verifyruns` and `/resync`."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.core import sandboxing
from cluster_manager.discord.render import icon
from cluster_manager.discord.replies import answer, defer, fitted
from cluster_manager.discord.roles import admins_only, submitter
from cluster_manager.rendering.ops import format_queue

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot


class OpsCog(commands.Cog):
    def __init__(self, bot: ClusterBot) -> None:
        self.bot = bot

    @app_commands.command(name="ping", description="Check that the bot answers, with its latency")
    async def ping(self, interaction: discord.Interaction) -> None:
        started = time.perf_counter()
        await defer(interaction, ephemeral=True)
        api_ms = (time.perf_counter() - started) * 1000
        gateway = self.bot.latency
        gateway_text = f"{gateway * 1000:.0f} ms" if math.isfinite(gateway) else "not connected"
        await answer(
            interaction,
            content=f"🏓 Pong! API round trip {api_ms:.0f} ms, gateway {gateway_text}.",
            ephemeral=True,
        )

    @app_commands.command(name="queue", description="Jobs waiting and running per GPU, and yours")
    async def queue(self, interaction: discord.Interaction) -> None:
        await defer(interaction, ephemeral=True)
        found = await self.bot.app.service.queues.view(submitter(interaction.user))
        text = format_queue(found.to_json())
        await answer(interaction, ephemeral=True, **fitted(text, file_name="queue.txt", code=True))

    @app_commands.command(name="verifydb", description="Check the database and its migrations")
    @app_commands.guild_only()
    @app_commands.default_permissions(manage_guild=True)
    @admins_only
    async def verifydb(self, interaction: discord.Interaction) -> None:
        await defer(interaction, ephemeral=True)
        check = await self.bot.app.check_database()
        if not check.reachable:
            lines = [f"❌ The database did not answer: {check.error}"]
        else:
            lines = [f"✅ The database answered `SELECT 1` in {check.round_trip_ms:.1f} ms."]
            if check.error:
                lines.append(f"❌ Cannot read the migration state: {check.error}")
            elif check.pending:
                lines.append(
                    f"❌ Pending migrations: {', '.join(check.pending)}; "
                    "run `cluster-manager db migrate`."
                )
            else:
                lines.append("✅ The schema is up to date: no pending migrations.")
        text = "\n".join(lines)  # a database's error may be long
        await answer(interaction, ephemeral=True, **fitted(text, file_name="verifydb.txt"))

    @app_commands.command(
        name="verifyruns", description="Run a known-good example on every GPU type served here"
    )
    @app_commands.guild_only()
    @app_commands.default_permissions(manage_guild=True)
    @admins_only
    async def verifyruns(self, interaction: discord.Interaction) -> None:
        await defer(interaction, ephemeral=True)
        checks = await self.bot.app.verify_launchers()
        lines = [
            f"{icon(c.passed)} {c.launcher} · **{c.gpu}**: {c.detail} in {c.seconds:.1f} s"
            for c in checks
        ]
        if not lines:
            lines = ["No GPU type has a launcher configured here."]
        lines.append(f"🔒 {sandboxing.policy(self.bot.app.settings.allow_unsandboxed_ranking)}")
        text = "\n".join(lines)  # a line per GPU type, each with its launcher's detail
        await answer(interaction, ephemeral=True, **fitted(text, file_name="verifyruns.txt"))

    @app_commands.command(name="resync", description="Sync the slash commands with Discord")
    @app_commands.guild_only()
    @app_commands.default_permissions(manage_guild=True)
    @admins_only
    async def resync(self, interaction: discord.Interaction) -> None:
        await defer(interaction, ephemeral=True)
        synced = await self.bot.sync_commands()
        where = "this server" if self.bot.config.guild_id else "all servers"
        await answer(
            interaction, content=f"🔄 Synced {len(synced)} commands to {where}.", ephemeral=True
        )
