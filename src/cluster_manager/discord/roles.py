"""Who may do what: Discord roles, looked up by name in the member's guild."""

from __future__ import annotations

import discord
from discord import app_commands

from cluster_manager.service import Submitter

ADMIN_ROLE = "Leaderboard Admin"
CREATOR_ROLE = "Leaderboard Creator"

# Checks run before the command (and before it defers): a refusal is an immediate reply.
admins_only = app_commands.checks.has_role(ADMIN_ROLE)
creators_only = app_commands.checks.has_any_role(ADMIN_ROLE, CREATOR_ROLE)


def has_role(user: discord.abc.User, name: str) -> bool:
    return isinstance(user, discord.Member) and discord.utils.get(user.roles, name=name) is not None


def is_admin(user: discord.abc.User) -> bool:
    return has_role(user, ADMIN_ROLE)


def submitter(user: discord.abc.User) -> Submitter:
    """The service knows Discord users by their id, which survives renames."""
    return Submitter(str(user.id), user.name)
