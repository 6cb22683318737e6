"""Answering interactions: acknowledge at once, answer later, keep errors private.

Discord wants an acknowledgement within 3 seconds, so every command `defer()`s first and
answers with followups. The first followup after a deferral replaces the "thinking…" message
and inherits its visibility; `send_error` takes care of that for the public ones.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import discord

# Set while a public "thinking…" message is the command's only answer.
_PUBLIC_PENDING = "cm_public_pending"


async def defer(interaction: discord.Interaction, *, ephemeral: bool) -> None:
    await interaction.response.defer(ephemeral=ephemeral, thinking=True)
    interaction.extras[_PUBLIC_PENDING] = not ephemeral


async def answer(interaction: discord.Interaction, **kwargs: Any) -> discord.WebhookMessage:
    """A followup that the command's later edits can refer to."""
    message = await interaction.followup.send(wait=True, **kwargs)
    interaction.extras[_PUBLIC_PENDING] = False
    return message


async def send_error(interaction: discord.Interaction, content: str) -> None:
    """An ephemeral message, whatever state the interaction is in; an error that echoes a long
    option (Discord takes 6,000 characters in one) keeps its start."""
    content = truncate(content, MESSAGE_CHARS)
    if not interaction.response.is_done():
        await interaction.response.send_message(content, ephemeral=True)
        return
    if interaction.extras.pop(_PUBLIC_PENDING, False):
        # The first followup would take over the public "thinking…" message: remove it, so
        # the error goes out as a message of its own that only the user sees.
        with contextlib.suppress(discord.HTTPException):
            await interaction.delete_original_response()
    await interaction.followup.send(content, ephemeral=True)


# What one message's content may hold; Discord refuses a longer one.
MESSAGE_CHARS = 2000


def fitted(text: str, *, file_name: str, head: str = "", code: bool = False) -> dict[str, Any]:
    """A message's content (and file) holding `text` within Discord's limit: all of it when it
    fits; else the lines that fit, and the whole of it as an attached file. `head` goes
    first; `code` puts `text` in a code block."""

    def shown(body: str, note: str = "") -> str:
        return f"{head}```\n{body}\n```{note}" if code else f"{head}{body}{note}"

    if len(whole := shown(text)) <= MESSAGE_CHARS:
        return {"content": whole}
    note = f"\n… and more: the whole is attached ({file_name})"
    room = MESSAGE_CHARS - len(shown("", note))
    kept: list[str] = []
    for line in text.splitlines():
        if sum(len(k) + 1 for k in kept) + len(line) > room:
            break
        kept.append(line)
    body = "\n".join(kept) if kept else truncate(text, room, marker="")
    return {"content": shown(body, note), "file": text_file(file_name, text)}


def text_file(name: str, text: str) -> discord.File:
    return discord.File(io.BytesIO(text.encode("utf-8")), filename=name)


def truncate(text: str, limit: int, *, marker: str = "\n…") -> str:
    """At most `limit` characters; the end is cut (logs keep their start)."""
    return text if len(text) <= limit else text[: max(0, limit - len(marker))] + marker


def truncate_start(text: str, limit: int, *, marker: str = "…\n") -> str:
    """At most `limit` characters; the start is cut (outputs keep their last lines)."""
    return text if len(text) <= limit else marker + text[len(text) - (limit - len(marker)) :]


def code_block(text: str, limit: int = 1000) -> str:
    """A code block of at most `limit` characters that no backticks in `text` can break."""
    body = text.replace("```", "`\u200b``").strip() or "(empty)"
    return f"```\n{truncate_start(body, limit - 8)}\n```"
