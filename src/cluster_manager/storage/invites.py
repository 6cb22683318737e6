"""Invite codes of closed leaderboards, and who joined with them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from cluster_manager.storage.database import Connection, Executor


@dataclass(frozen=True)
class Invite:
    code: str
    leaderboard: str
    max_uses: int
    uses: int
    created_by: str
    created_at: datetime
    revoked: bool

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "created_at": self.created_at.isoformat()}


async def set_closed(db: Executor, leaderboard_id: int, closed: bool) -> None:
    await db.execute("UPDATE leaderboards SET closed = $2 WHERE id = $1", leaderboard_id, closed)


async def insert_invites(
    conn: Connection,
    leaderboard_id: int,
    codes: list[str],
    max_uses: int,
    by: str,
    now: datetime,
) -> None:
    await conn.executemany(
        "INSERT INTO invites (code, leaderboard_id, max_uses, created_by, created_at)"
        " VALUES ($1, $2, $3, $4, $5)",
        [(code, leaderboard_id, max_uses, by, now) for code in codes],
    )


_SELECT_INVITE = """
    SELECT i.code, l.name AS leaderboard, i.max_uses, i.uses, i.created_by, i.created_at,
           i.revoked_at IS NOT NULL AS revoked
    FROM invites i JOIN leaderboards l ON l.id = i.leaderboard_id
"""


async def invites_of(db: Executor, leaderboard_id: int) -> list[Invite]:
    rows = await db.fetch(
        _SELECT_INVITE + " WHERE i.leaderboard_id = $1 ORDER BY i.created_at, i.code",
        leaderboard_id,
    )
    return [Invite(**dict(r)) for r in rows]


async def revoke(db: Executor, code: str, now: datetime) -> bool:
    result = await db.execute(
        "UPDATE invites SET revoked_at = $2 WHERE code = $1 AND revoked_at IS NULL", code, now
    )
    return result != "UPDATE 0"


async def is_member(db: Executor, leaderboard_id: int, user_id: int) -> bool:
    found: bool = await db.fetchval(
        "SELECT EXISTS (SELECT 1 FROM leaderboard_members"
        " WHERE leaderboard_id = $1 AND user_id = $2)",
        leaderboard_id,
        user_id,
    )
    return found


async def redeem(conn: Connection, code: str, user_id: int, now: datetime) -> tuple[str, bool]:
    """Makes the user a member of the code's leaderboard, using the code once (not again if
    they already are one). (leaderboard name, newly joined); raises LookupError with why the
    code cannot be used. Call in a transaction: the use and the membership go together."""
    row = await conn.fetchrow(
        "SELECT i.leaderboard_id, l.name, i.uses, i.max_uses, i.revoked_at"
        " FROM invites i JOIN leaderboards l ON l.id = i.leaderboard_id"
        " WHERE i.code = $1 FOR UPDATE OF i",
        code,
    )
    if row is None or row["revoked_at"] is not None:
        raise LookupError("this invite code is unknown or was revoked")
    if await is_member(conn, row["leaderboard_id"], user_id):
        return row["name"], False
    if row["uses"] >= row["max_uses"]:
        raise LookupError("this invite code has been used as often as it may be")
    await conn.execute("UPDATE invites SET uses = uses + 1 WHERE code = $1", code)
    await conn.execute(
        "INSERT INTO leaderboard_members (leaderboard_id, user_id, invite_code, joined_at)"
        " VALUES ($1, $2, $3, $4)",
        row["leaderboard_id"],
        user_id,
        code,
        now,
    )
    return row["name"], True
