"""Rate limits over a sliding window: submissions per leaderboard, per GPU type and per day,
and script runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from cluster_manager.service.errors import RateLimitedError

DEFAULT_RATE_LIMIT_PER_HOUR = 30
DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR = 10
RATE_WINDOW = timedelta(hours=1)


def check_rate(
    started: Sequence[datetime],
    limit: int,
    now: datetime,
    what: str,
    window: timedelta = RATE_WINDOW,
) -> None:
    """Refuses a start when `limit` already began within `window` (`started`, oldest first);
    the error says when the one that frees a place leaves the window. `what` names the
    limit's unit."""
    if len(started) < limit:
        return
    wait = started[len(started) - limit] + window - now
    seconds = max(1, int(wait.total_seconds()) + 1)
    raise RateLimitedError(
        f"rate limit: {limit} {what}; try again in {human_duration(seconds)}",
        timedelta(seconds=seconds),
    )


def human_duration(seconds: int) -> str:
    if seconds >= 2 * 3600:  # a daily quota's wait; an hourly one reads better in minutes
        hours, rest = divmod(seconds, 3600)
        return f"{hours} h {rest // 60} min"
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
