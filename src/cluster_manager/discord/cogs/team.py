"""`/team ...`: teams on a leaderboard. A member creates a team, hands single-use codes to
team-mates, who join with `/team join`; the team ranks as one entry with its best score.
Answers that carry codes or membership are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.core.teams import Team
from cluster_manager.discord import render
from cluster_manager.discord.autocomplete import leaderboard_names
from cluster_manager.discord.replies import answer, defer
from cluster_manager.discord.roles import is_admin, submitter
from cluster_manager.discord.widgets import show_pages
from cluster_manager.service import Service

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot


def invite_message(board: str, code: str) -> str:
    return (
        f"🎟️ A code for one more member of your team on **{board}** "
        "(good once, while you stay in the team):\n"
        f"```\n{code}\n```\n"
        f"Your team-mate joins with `/team join code:{code}`."
    )


def joined_message(team: Team) -> str:
    return (
        f"✅ You joined team **{discord.utils.escape_markdown(team.name)}** on "
        f"**{team.leaderboard}** ({len(team.members)}/{team.size_limit} members): you rank "
        "together now."
    )


class TeamCog(
    commands.GroupCog,
    group_name="team",
    group_description="Teams on a leaderboard: its members rank as one entry",
):
    def __init__(self, bot: ClusterBot) -> None:
        self.bot = bot
        super().__init__()

    @property
    def service(self) -> Service:
        return self.bot.app.service

    async def _say(self, interaction: discord.Interaction, content: str) -> None:
        await answer(interaction, content=content, ephemeral=True)

    @app_commands.command(name="create", description="Start a team on a leaderboard")
    @app_commands.describe(
        leaderboard="The leaderboard", name="The team's name (letters, digits, spaces, _ . -)"
    )
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    async def create(self, interaction: discord.Interaction, leaderboard: str, name: str) -> None:
        await defer(interaction, ephemeral=True)
        team = await self.service.teams.create(leaderboard, name, submitter(interaction.user))
        await self._say(
            interaction,
            f"👥 Team **{discord.utils.escape_markdown(team.name)}** is on "
            f"**{team.leaderboard}**, with you in it: `/team invite` gives a code for each "
            f"team-mate (up to {team.size_limit} members).",
        )

    @app_commands.command(name="invite", description="A code for one more member of your team")
    @app_commands.describe(leaderboard="The leaderboard of your team")
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    async def invite(self, interaction: discord.Interaction, leaderboard: str) -> None:
        await defer(interaction, ephemeral=True)
        code = await self.service.teams.invite(leaderboard, submitter(interaction.user))
        await self._say(interaction, invite_message(leaderboard, code))

    @app_commands.command(name="join", description="Join a team with a code a member gave you")
    @app_commands.describe(code="The team code (team_...)")
    async def join(self, interaction: discord.Interaction, code: str) -> None:
        await defer(interaction, ephemeral=True)
        team = await self.service.teams.join(code, submitter(interaction.user))
        await self._say(interaction, joined_message(team))

    @app_commands.command(name="leave", description="Leave your team on a leaderboard")
    @app_commands.describe(leaderboard="The leaderboard of your team")
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    async def leave(self, interaction: discord.Interaction, leaderboard: str) -> None:
        await defer(interaction, ephemeral=True)
        name = await self.service.teams.leave(leaderboard, submitter(interaction.user))
        await self._say(
            interaction,
            f"👋 You left team **{discord.utils.escape_markdown(name)}** on **{leaderboard}**: "
            "your ranked submissions rank as your own again.",
        )

    @app_commands.command(name="show", description="Your team on a leaderboard, or every team")
    @app_commands.describe(leaderboard="The leaderboard", all_="Every team on the leaderboard")
    @app_commands.rename(all_="all")
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    async def show(
        self, interaction: discord.Interaction, leaderboard: str, all_: bool = False
    ) -> None:
        await defer(interaction, ephemeral=True)
        user = submitter(interaction.user)
        if all_:
            # Admins see the teams of invite-only boards, as they see those boards elsewhere.
            teams = await self.service.teams.all(
                leaderboard, user, include_closed=is_admin(interaction.user)
            )
            pages = render.teams_pages(leaderboard, teams)
        else:
            team = await self.service.teams.of_user(leaderboard, user)
            if team is None:
                await self._say(
                    interaction,
                    f"You are in no team on **{leaderboard}**: `/team create` starts one, "
                    "`/team join` joins one.",
                )
                return
            pages = render.team_pages(team)
        await show_pages(interaction, pages, ephemeral=True, timeout=self.bot.config.view_timeout)
