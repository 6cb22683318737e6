"""Submissions being followed in Discord (`discord_follows`): kept until their report is
sent, so that a restarted bot can take them up again."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_manager.storage.database import Executor


@dataclass(frozen=True)
class Follow:
    submission_id: int
    member_id: int
    channel_id: int


async def start(db: Executor, follow: Follow) -> None:
    await db.execute(
        "INSERT INTO discord_follows (submission_id, member_id, channel_id) VALUES ($1, $2, $3)"
        " ON CONFLICT (submission_id) DO UPDATE"
        " SET member_id = EXCLUDED.member_id, channel_id = EXCLUDED.channel_id",
        follow.submission_id,
        follow.member_id,
        follow.channel_id,
    )


async def end(db: Executor, submission_id: int) -> None:
    await db.execute("DELETE FROM discord_follows WHERE submission_id = $1", submission_id)


async def unreported(db: Executor) -> list[Follow]:
    """Every follow whose report was not sent, oldest first."""
    rows = await db.fetch(
        "SELECT submission_id, member_id, channel_id FROM discord_follows"
        " ORDER BY started_at, submission_id"
    )
    return [Follow(r["submission_id"], r["member_id"], r["channel_id"]) for r in rows]
