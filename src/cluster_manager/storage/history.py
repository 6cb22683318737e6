"""The ranking's history as the charts show it: every improvement of a user's best, and the
version a cached chart is keyed by, bumped by whatever changes what the charts show."""

from __future__ import annotations

from datetime import datetime

from cluster_manager.storage.controls import NOT_BANNED_E, STILL_VALID_E
from cluster_manager.storage.database import Executor


async def score_history(
    db: Executor, *, leaderboard_id: int, gpu: str
) -> list[tuple[str, float, datetime]]:
    """(user, score, when) of every improvement of a user's best on a leaderboard and GPU,
    oldest first."""
    rows = await db.fetch(
        f"""
        SELECT u.external_id AS user_name, e.score, e.ranked_at
        FROM ranking_events e JOIN users u ON u.id = e.user_id
        WHERE e.leaderboard_id = $1 AND e.gpu = $2 AND {NOT_BANNED_E}
              AND {STILL_VALID_E}
        ORDER BY e.id
        """,
        leaderboard_id,
        gpu,
    )
    return [(r["user_name"], r["score"], r["ranked_at"]) for r in rows]


async def history_version(db: Executor, leaderboard_id: int) -> int:
    """Changes whenever the leaderboard's ranking history as shown does (see `bump_history`):
    what a cached chart is keyed by."""
    version: int = await db.fetchval(
        "SELECT history_version FROM leaderboards WHERE id = $1", leaderboard_id
    )
    return version


async def bump_history(db: Executor, leaderboard_id: int) -> None:
    """Call in the transaction that changes what the leaderboard's charts show."""
    await db.execute(
        "UPDATE leaderboards SET history_version = history_version + 1 WHERE id = $1",
        leaderboard_id,
    )


async def bump_history_of_user(db: Executor, user_id: int) -> None:
    """Every leaderboard a user's points are on (a ban hides them, unbanning shows them)."""
    await db.execute(
        "UPDATE leaderboards SET history_version = history_version + 1"
        " WHERE id IN (SELECT DISTINCT leaderboard_id FROM ranking_events WHERE user_id = $1)",
        user_id,
    )
