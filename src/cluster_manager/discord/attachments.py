"""Uploaded files: refused by their reported size and name before any byte is downloaded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

import discord

from cluster_manager.core.submission import too_large
from cluster_manager.discord.error_handlers import (
    AttachmentError,
    FileTooLargeError,
    WrongFileTypeError,
)


async def read_attachment(
    attachment: discord.Attachment, *, max_bytes: int, suffixes: Sequence[str], what: str
) -> bytes:
    name = attachment.filename
    suffix = PurePosixPath(name).suffix.lower()
    if suffixes and suffix not in suffixes:
        raise WrongFileTypeError(f"{name}: {what} must be a {' or '.join(suffixes)} file")
    if attachment.size > max_bytes:
        raise FileTooLargeError(too_large(name, attachment.size, max_bytes, what))
    try:
        data = await attachment.read()
    except discord.HTTPException as exc:
        raise AttachmentError(f"{name}: the file could not be downloaded ({exc.status})") from None
    if len(data) > max_bytes:  # the reported size is only a claim
        raise FileTooLargeError(too_large(name, len(data), max_bytes, what))
    return data
