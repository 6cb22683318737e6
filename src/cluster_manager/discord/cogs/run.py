"""`/run`: a quick, unranked script run on a GPU; the output comes back as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.core.submission import MAX_SUBMISSION_BYTES
from cluster_manager.discord import render
from cluster_manager.discord.attachments import read_attachment
from cluster_manager.discord.autocomplete import served_gpus
from cluster_manager.discord.replies import defer, text_file
from cluster_manager.discord.roles import submitter
from cluster_manager.service.script_launch import MAX_SCRIPT_SECONDS, script_request

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot

DEFAULT_SCRIPT_SECONDS = 60.0


def _status(state: str, name: str, gpu: str) -> str:
    if state == "waiting":
        return f"⏳ Waiting for a free slot on **{gpu}** for `{name}`…"
    return f"⚙️ Running `{name}` on **{gpu}**…"


class RunCog(commands.Cog):
    def __init__(self, bot: ClusterBot) -> None:
        self.bot = bot

    @app_commands.command(name="run", description="Run a Python script on a GPU (not ranked)")
    @app_commands.describe(
        script="The Python file to run as it is",
        gpu="GPU type to run on",
        time_limit=f"Seconds it may run (default {DEFAULT_SCRIPT_SECONDS:g}, at most "
        f"{MAX_SCRIPT_SECONDS:g})",
    )
    @app_commands.autocomplete(gpu=served_gpus)
    @app_commands.guild_only()
    async def run(
        self,
        interaction: discord.Interaction,
        script: discord.Attachment,
        gpu: str,
        time_limit: app_commands.Range[float, 1.0, MAX_SCRIPT_SECONDS] = DEFAULT_SCRIPT_SECONDS,
    ) -> None:
        # Private: a script's output is its author's business.
        await defer(interaction, ephemeral=True)
        app = self.bot.app
        data = await read_attachment(
            script, max_bytes=MAX_SUBMISSION_BYTES, suffixes=(".py",), what="a script"
        )
        gpu_type = app.registry.get(gpu)  # an unknown GPU is refused before anything starts
        limits = gpu_type.run_limits(app.local_limits())
        request = script_request(script.filename, data, timeout_s=time_limit, limits=limits)
        name = request.submission_name

        async def show(state: str) -> None:
            await interaction.edit_original_response(content=_status(state, name, gpu))

        # The service applies the per-user limit and waits for a slot of the GPU type.
        result = await app.service.scripts.run(
            submitter(interaction.user), gpu, request, app.launchers, on_state=show
        )
        await interaction.edit_original_response(
            content=None,
            embed=render.script_embed(request.submission_name, gpu, result),
            attachments=[
                text_file(f"{request.submission_name}.output.txt", render.script_output(result))
            ],
        )
