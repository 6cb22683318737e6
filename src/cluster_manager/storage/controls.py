"""Organisers' switches: submissions paused (everywhere or on one leaderboard), users banned."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from cluster_manager.storage.database import Executor

# A ranking row, event or score of a banned user is hidden wherever these filters are added
# (by the alias of the row's table): the rows stay, so unbanning shows them again.
_NOT_BANNED = "NOT EXISTS (SELECT 1 FROM user_bans b WHERE b.user_id = {alias}.user_id)"
NOT_BANNED_R = _NOT_BANNED.format(alias="r")
NOT_BANNED_E = _NOT_BANNED.format(alias="e")
# A chart's point from a submission since invalidated is hidden the same way.
STILL_VALID_E = (
    "NOT EXISTS (SELECT 1 FROM submissions v WHERE v.id = e.submission_id"
    " AND v.invalidated_at IS NOT NULL)"
)


@dataclass(frozen=True)
class Pause:
    leaderboard: str | None  # None: every leaderboard
    reason: str
    paused_by: str
    paused_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "paused_at": self.paused_at.isoformat()}


@dataclass(frozen=True)
class Ban:
    user: str  # external id
    name: str
    reason: str
    banned_by: str
    banned_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "banned_at": self.banned_at.isoformat()}


async def pause(
    db: Executor, leaderboard_id: int | None, reason: str, by: str, now: datetime
) -> None:
    """Pauses the scope, or updates the reason of a pause already there."""
    await db.execute(
        """
        INSERT INTO submission_pauses (leaderboard_id, reason, paused_by, paused_at)
        VALUES ($1, $2, $3, $4)
        ON CONFLICT ((coalesce(leaderboard_id, 0)))
        DO UPDATE SET reason = EXCLUDED.reason, paused_by = EXCLUDED.paused_by,
                      paused_at = EXCLUDED.paused_at
        """,
        leaderboard_id,
        reason,
        by,
        now,
    )


async def resume(db: Executor, leaderboard_id: int | None) -> bool:
    """Ends the scope's pause; False when it was not paused."""
    result = await db.execute(
        "DELETE FROM submission_pauses WHERE coalesce(leaderboard_id, 0) = coalesce($1, 0)",
        leaderboard_id,
    )
    return result != "DELETE 0"


_SELECT_PAUSE = """
    SELECT l.name AS leaderboard, p.reason, p.paused_by, p.paused_at
    FROM submission_pauses p LEFT JOIN leaderboards l ON l.id = p.leaderboard_id
"""


async def pause_of(db: Executor, leaderboard_id: int | None) -> Pause | None:
    """What stops submissions to this leaderboard: the global pause first, then its own.
    With None, only the global pause."""
    row = await db.fetchrow(
        _SELECT_PAUSE + " WHERE p.leaderboard_id IS NULL OR p.leaderboard_id = $1"
        " ORDER BY p.leaderboard_id NULLS FIRST LIMIT 1",
        leaderboard_id,
    )
    return None if row is None else Pause(**dict(row))


async def pauses(db: Executor) -> list[Pause]:
    rows = await db.fetch(_SELECT_PAUSE + " ORDER BY p.leaderboard_id NULLS FIRST, l.name")
    return [Pause(**dict(r)) for r in rows]


async def ban(db: Executor, user_id: int, reason: str, by: str, now: datetime) -> None:
    await db.execute(
        """
        INSERT INTO user_bans (user_id, reason, banned_by, banned_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT (user_id) DO UPDATE SET reason = EXCLUDED.reason,
            banned_by = EXCLUDED.banned_by, banned_at = EXCLUDED.banned_at
        """,
        user_id,
        reason,
        by,
        now,
    )


async def unban(db: Executor, user_id: int) -> bool:
    return await db.execute("DELETE FROM user_bans WHERE user_id = $1", user_id) != "DELETE 0"


_SELECT_BAN = """
    SELECT u.external_id AS user, u.name, b.reason, b.banned_by, b.banned_at
    FROM user_bans b JOIN users u ON u.id = b.user_id
"""


async def ban_of(db: Executor, user_id: int) -> Ban | None:
    row = await db.fetchrow(_SELECT_BAN + " WHERE b.user_id = $1", user_id)
    return None if row is None else Ban(**dict(row))


async def bans(db: Executor) -> list[Ban]:
    return [Ban(**dict(r)) for r in await db.fetch(_SELECT_BAN + " ORDER BY b.banned_at")]
