"""Waiting for something with a time limit, without ever losing a cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


async def within(seconds: float, awaitable: Awaitable[object]) -> bool:
    """Awaits `awaitable` for at most `seconds`: True if it finished, False if time ran out.

    `asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11 `wait_for` can drop a cancel
    that meets the result in one turn of the loop, and the cancelled task then runs on
    (docs/DEVELOPMENT.md).
    """
    try:
        async with asyncio.timeout(seconds):
            await awaitable
    except TimeoutError:
        return False
    return True
