"""`/token`: an API token for the terminal (popcorn-cli, `cluster-manager` as a client), and
`/join`: joining an invite-only leaderboard with a code.

The token is the user's Discord identity on the API: what they submit there ranks as theirs.
It is shown once, privately, and stored only as a hash."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.discord.replies import defer
from cluster_manager.discord.roles import submitter

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot


def token_message(token: str, api_url: str | None) -> str:
    url = api_url or "<this server's API URL>"
    return (
        "🔑 Your API token (shown once; a new `/token` replaces it):\n"
        f"```\n{token}\n```\n"
        f"**popcorn-cli**: put `cli_id: {token}` in `~/.popcorn.yaml` and set "
        f"`POPCORN_API_URL={url}`.\n"
        f"**cluster-manager**: set `CLUSTER_MANAGER_API_URL={url}` and "
        "`CLUSTER_MANAGER_TOKEN` to the token.\n"
        "Keep it secret: it submits as you. `/token revoke:True` turns it off."
    )


class AccountCog(commands.Cog):
    def __init__(self, bot: ClusterBot) -> None:
        self.bot = bot

    @app_commands.command(name="token", description="Get an API token to submit from the terminal")
    @app_commands.describe(revoke="Only turn off your current token")
    async def token(self, interaction: discord.Interaction, revoke: bool = False) -> None:
        await defer(interaction, ephemeral=True)
        service = self.bot.app.service
        user = submitter(interaction.user)
        if revoke:
            revoked = await service.accounts.revoke_token(user.external_id)
            content = "Your API token is revoked." if revoked else "You had no API token."
        else:
            content = token_message(
                await service.accounts.issue_token(user), self.bot.app.settings.api_url
            )
        await interaction.edit_original_response(content=content)

    @app_commands.command(name="join", description="Join an invite-only leaderboard with a code")
    @app_commands.describe(code="The invite code an organiser gave you")
    async def join(self, interaction: discord.Interaction, code: str) -> None:
        await defer(interaction, ephemeral=True)
        board, joined = await self.bot.app.service.invites.join(code, submitter(interaction.user))
        content = (
            f"✅ You joined **{board}**: you can submit to it now."
            if joined
            else f"You are already a member of **{board}**."
        )
        await interaction.edit_original_response(content=content)
