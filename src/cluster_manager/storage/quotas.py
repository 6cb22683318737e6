"""What the quotas count (a user's recent submissions: per leaderboard and kind, across
leaderboards, ranked ones per GPU type) and the overrides admins set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from cluster_manager.storage.database import Connection, Executor

RANKED_MODES = ["leaderboard"]


@dataclass(frozen=True)
class QuotaOverride:
    per_hour: int | None
    daily: int | None


@dataclass(frozen=True)
class CustomQuota:
    """An admin's override with whom it is for and who set it (`admin status`)."""

    user: str  # external id
    name: str
    per_hour: int | None
    daily: int | None
    set_by: str
    set_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "set_at": self.set_at.isoformat()}


async def lock_user(conn: Connection, user_id: int) -> None:
    """Until the transaction ends, one user's submissions go one at a time: racing requests
    (on any leaderboard) count each other against the quotas."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('cm-quota:' || $1))", str(user_id))


async def times_on_board(
    db: Executor, *, user_ids: Sequence[int], leaderboard_id: int, ranked: bool, since: datetime
) -> list[datetime]:
    """Times of the users' ranked (or other) submissions on a leaderboard since `since` (one
    user's, or a team's where its quota is shared)."""
    rows = await db.fetch(
        """
        SELECT submitted_at FROM submissions
        WHERE user_id = ANY($1::bigint[]) AND leaderboard_id = $2 AND submitted_at >= $3
          AND (mode = ANY($4::text[])) = $5
        ORDER BY submitted_at
        """,
        list(user_ids),
        leaderboard_id,
        since,
        RANKED_MODES,
        ranked,
    )
    return [r["submitted_at"] for r in rows]


async def times_anywhere(db: Executor, *, user_id: int, since: datetime) -> list[datetime]:
    rows = await db.fetch(
        "SELECT submitted_at FROM submissions WHERE user_id = $1 AND submitted_at >= $2"
        " ORDER BY submitted_at",
        user_id,
        since,
    )
    return [r["submitted_at"] for r in rows]


async def ranked_times_on_gpu(
    db: Executor, *, user_id: int, gpu: str, since: datetime
) -> list[datetime]:
    """Times of the user's ranked submissions that run on `gpu`, on any leaderboard."""
    rows = await db.fetch(
        """
        SELECT s.submitted_at FROM submissions s
        WHERE s.user_id = $1 AND s.submitted_at >= $2 AND s.mode = ANY($4::text[])
          AND EXISTS (SELECT 1 FROM jobs j WHERE j.submission_id = s.id AND j.gpu = $3)
        ORDER BY s.submitted_at
        """,
        user_id,
        since,
        gpu,
        RANKED_MODES,
    )
    return [r["submitted_at"] for r in rows]


async def override_of(db: Executor, user_id: int) -> QuotaOverride | None:
    row = await db.fetchrow("SELECT per_hour, daily FROM user_quotas WHERE user_id = $1", user_id)
    return None if row is None else QuotaOverride(row["per_hour"], row["daily"])


_SELECT_CUSTOM = """
    SELECT u.external_id AS user, u.name, q.per_hour, q.daily, q.set_by, q.set_at
    FROM user_quotas q JOIN users u ON u.id = q.user_id
"""


async def custom_quotas(db: Executor) -> list[CustomQuota]:
    rows = await db.fetch(_SELECT_CUSTOM + " ORDER BY u.external_id")
    return [CustomQuota(**dict(r)) for r in rows]


async def custom_quota_of(db: Executor, user_id: int) -> CustomQuota | None:
    row = await db.fetchrow(_SELECT_CUSTOM + " WHERE q.user_id = $1", user_id)
    return None if row is None else CustomQuota(**dict(row))


async def set_override(
    db: Executor, user_id: int, per_hour: int | None, daily: int | None, by: str, now: datetime
) -> None:
    await db.execute(
        """
        INSERT INTO user_quotas (user_id, per_hour, daily, set_by, set_at)
        VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (user_id) DO UPDATE SET per_hour = EXCLUDED.per_hour,
            daily = EXCLUDED.daily, set_by = EXCLUDED.set_by, set_at = EXCLUDED.set_at
        """,
        user_id,
        per_hour,
        daily,
        by,
        now,
    )


async def clear_override(db: Executor, user_id: int) -> bool:
    return await db.execute("DELETE FROM user_quotas WHERE user_id = $1", user_id) != "DELETE 0"


async def first_seen(db: Executor, user_id: int) -> datetime:
    """When this service first saw the user."""
    seen: datetime = await db.fetchval("SELECT created_at FROM users WHERE id = $1", user_id)
    return seen
