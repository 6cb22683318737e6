"""Hourly rate limits, for submissions per leaderboard and for script runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from cluster_manager.service.errors import RateLimitedError

DEFAULT_RATE_LIMIT_PER_HOUR = 30
DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR = 10
RATE_WINDOW = timedelta(hours=1)


def check_rate(started: Sequence[datetime], limit: int, now: datetime, what: str) -> None:
    """Refuses a start when `limit` already began in the last hour (`started`, oldest first);
    the error says when the oldest leaves the window. `what` names the limit's unit."""
    if len(started) < limit:
        return
    wait = started[0] + RATE_WINDOW - now
    seconds = max(1, int(wait.total_seconds()) + 1)
    raise RateLimitedError(
        f"rate limit: {limit} {what}; try again in {human_duration(seconds)}",
        timedelta(seconds=seconds),
    )


def human_duration(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
