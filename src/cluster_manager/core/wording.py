"""Counts, moments and spans of time as a person writes them, for every front end and the
service's own messages: `1 submission`, `2026-11-28 09:31 UTC`, `3 days 4 hours`."""

from __future__ import annotations

from datetime import UTC, datetime

DAYS_A_YEAR = 365


def counted(count: int, noun: str, plural: str = "") -> str:
    """`1 submission`, `2 submissions`: a count as a sentence says it."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def utc_minute(at: datetime) -> str:
    """A moment to the minute in UTC (`2026-11-28 09:31 UTC`): no seconds, no microseconds,
    no offset to work out."""
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def span_text(seconds: float) -> str:
    """How long something still lasts, in its two largest units: `3 days 4 hours`,
    `5 hours 12 minutes`, `12 minutes`; a year or more (a board made without a real
    deadline) is `over a year`, not a count of days nobody reads."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days >= DAYS_A_YEAR:
        return "over a year"
    if days:
        return counted(days, "day") + (f" {counted(hours, 'hour')}" if hours else "")
    if hours:
        return counted(hours, "hour") + (f" {counted(minutes, 'minute')}" if minutes else "")
    return counted(minutes, "minute") if minutes else "under a minute"


def dispatched_to(launcher: str) -> str:
    """Where a job went, in the same words on every front end: `dispatched to the local
    launcher` (a launcher's name: local, github, modal, slurm)."""
    return f"dispatched to the {launcher} launcher" if launcher else "dispatched to a launcher"
