"""Discord payloads for the bot benchmark: the guild the bot sees and `/leaderboard submit`.

Shared by the benchmark (which opens the interactions on the fake Discord API) and the bot
process (which receives them as a gateway would deliver them). Kept free of test-only
imports so the bot process loads nothing a real bot would not.
"""

from __future__ import annotations

from typing import Any

APP_ID = 4242  # the fake Discord API's application
GUILD_ID = 700
CHANNEL_ID = 701
TEXT_PERMISSIONS = "117760"  # view channels, send messages, embed links, attach files, history

CHANNEL = {
    "id": str(CHANNEL_ID),
    "type": 0,
    "guild_id": str(GUILD_ID),
    "name": "kernels",
    "position": 0,
    "permission_overwrites": [],
    "nsfw": False,
    "parent_id": None,
}
GUILD = {
    "id": str(GUILD_ID),
    "name": "GPU Mode",
    "owner_id": "1",
    "roles": [
        {
            "id": str(GUILD_ID),
            "name": "@everyone",
            "color": 0,
            "hoist": False,
            "position": 0,
            "permissions": "0",
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }
    ],
    "channels": [CHANNEL],
    "members": [],
    "member_count": 100,
    "features": [],
    "emojis": [],
    "stickers": [],
    "unavailable": False,
}


def member(user_id: int) -> dict[str, Any]:
    name = f"user{user_id}"
    return {
        "user": {
            "id": str(user_id),
            "username": name,
            "discriminator": "0",
            "global_name": name,
            "avatar": None,
            "public_flags": 0,
        },
        "roles": [],
        "joined_at": "2029-01-01T00:00:00+00:00",
        "deaf": False,
        "mute": False,
        "flags": 0,
        "permissions": "0",
    }


def submit_interaction(
    interaction_id: int,
    token: str,
    user_id: int,
    attachment: dict[str, Any],
    *,
    leaderboard: str,
    mode: str,
) -> dict[str, Any]:
    """An INTERACTION_CREATE payload for `/leaderboard submit` with an uploaded script."""
    options = [
        {"name": "script", "type": 11, "value": attachment["id"]},
        {"name": "leaderboard", "type": 3, "value": leaderboard},
        {"name": "mode", "type": 3, "value": mode},
    ]
    return {
        "id": str(interaction_id),
        "application_id": str(APP_ID),
        "type": 2,
        "token": token,
        "version": 1,
        "guild_id": str(GUILD_ID),
        "guild": {"id": str(GUILD_ID), "locale": "en-US", "features": []},
        "channel_id": str(CHANNEL_ID),
        "channel": CHANNEL,
        "member": member(user_id),
        "data": {
            "id": "9000",
            "name": "leaderboard",
            "type": 1,
            "options": [{"name": "submit", "type": 1, "options": options}],
            "guild_id": str(GUILD_ID),
            "resolved": {"attachments": {attachment["id"]: attachment}},
        },
        "app_permissions": TEXT_PERMISSIONS,
        "locale": "en-US",
        "guild_locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {"0": str(GUILD_ID)},
        "context": 0,
        "attachment_size_limit": 10 * 1024 * 1024,
    }
