"""The leaders each leaderboard and GPU had when last announced."""

from __future__ import annotations

from datetime import datetime

from cluster_manager.storage.database import Connection

# One announcer at a time across every process on this database (bots, servers).
ANNOUNCER_LOCK = 0x616E6E6F  # "anno"


async def lock(conn: Connection) -> bool:
    """Takes the announcer's lock for this transaction; False if another process holds it."""
    taken: bool = await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", ANNOUNCER_LOCK)
    return taken


async def last_announced(
    conn: Connection, leaderboard_id: int, gpu: str
) -> tuple[list[str], datetime] | None:
    row = await conn.fetchrow(
        "SELECT leaders, announced_at FROM announced_leaders"
        " WHERE leaderboard_id = $1 AND gpu = $2",
        leaderboard_id,
        gpu,
    )
    if row is None:
        return None
    return list(row["leaders"]), row["announced_at"]


async def record(
    conn: Connection, leaderboard_id: int, gpu: str, leaders: list[str], now: datetime
) -> None:
    await conn.execute(
        """
        INSERT INTO announced_leaders (leaderboard_id, gpu, leaders, announced_at)
        VALUES ($1, $2, $3, $4)
        ON CONFLICT (leaderboard_id, gpu)
        DO UPDATE SET leaders = EXCLUDED.leaders, announced_at = EXCLUDED.announced_at
        """,
        leaderboard_id,
        gpu,
        leaders,
        now,
    )
