"""Autocomplete: suggestions come from the service and the registry, up to Discord's 25.

Discord ignores a late or failed answer, so a lookup that fails only means no suggestions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import discord
from discord import app_commands

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.discord.roles import is_admin, submitter

if TYPE_CHECKING:
    from cluster_manager.app import App
    from cluster_manager.discord.bot import ClusterBot

MAX_CHOICES = 25
# How a choice marks a leaderboard past its deadline that still takes runs.
AFTER_DEADLINE = "(after the deadline)"


def app_of(interaction: discord.Interaction) -> App:
    return cast("ClusterBot", interaction.client).app


def _choices(names: list[str], current: str) -> list[app_commands.Choice[str]]:
    prefix = current.strip().lower()
    found = [n for n in names if n.lower().startswith(prefix)]
    return [app_commands.Choice(name=n, value=n) for n in found[:MAX_CHOICES]]


async def leaderboard_names(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    command = interaction.command
    if command is not None and command.name == "submit":
        return await _submittable_names(interaction, current)
    names = await app_of(interaction).service.leaderboards.names(
        current.strip().lower(),
        submitter(interaction.user),
        include_closed=is_admin(interaction.user),
    )
    return [app_commands.Choice(name=n, value=n) for n in names[:MAX_CHOICES]]


async def _submittable_names(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    """The boards that take a submission now: the open ones, then the ended ones whose
    organisers take runs after the deadline, marked so (those rank on their own)."""
    found = await app_of(interaction).service.leaderboards.submittable_names(
        current.strip().lower(),
        submitter(interaction.user),
        include_closed=is_admin(interaction.user),
    )
    return [
        app_commands.Choice(name=name if is_open else f"{name} {AFTER_DEADLINE}", value=name)
        for name, is_open in found[:MAX_CHOICES]
    ]


async def leaderboard_gpus(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    """The GPUs of the leaderboard named in the same command."""
    name = getattr(interaction.namespace, "leaderboard", None) or getattr(
        interaction.namespace, "name", None
    )
    if not name:
        return []
    try:
        board = await app_of(interaction).service.leaderboards.visible(
            name, submitter(interaction.user), include_closed=is_admin(interaction.user)
        )
    except ClusterManagerError:
        return []
    return _choices(list(board.gpus), current)


async def served_gpus(
    interaction: discord.Interaction, current: str
) -> list[app_commands.Choice[str]]:
    """GPU types this bot has a launcher for."""
    return _choices(sorted(g.name for g in app_of(interaction).served_gpus), current)
