"""Which GPU types the live whole-queue schedulers serve. Each scheduler refreshes its rows on
its heartbeat and removes them when it stops cleanly; the rows of one that died stop counting
once they are older than the window, and are dropped an hour later."""

from __future__ import annotations

from collections.abc import Sequence

from cluster_manager.storage.database import Executor

# A type counts as served while a scheduler has said so within this many seconds.
SERVED_WINDOW_S = 60.0
# The rows of a scheduler that died count for nothing long before this; then they go.
FORGET_S = 3600.0


async def register(db: Executor, owner: str, gpus: Sequence[str]) -> None:
    """`owner` serves `gpus` as of now (its heartbeat); rows long dead are dropped."""
    await db.execute(
        """
        INSERT INTO served_gpus (gpu, owner, seen_at)
        SELECT gpu, $1, now() FROM unnest($2::text[]) AS g(gpu)
        ON CONFLICT (gpu, owner) DO UPDATE SET seen_at = excluded.seen_at
        """,
        owner,
        list(gpus),
    )
    await db.execute(
        "DELETE FROM served_gpus WHERE seen_at < now() - make_interval(secs => $1)", FORGET_S
    )


async def unregister(db: Executor, owner: str) -> None:
    """`owner` stopped cleanly: it serves nothing any more."""
    await db.execute("DELETE FROM served_gpus WHERE owner = $1", owner)


async def served_gpus(db: Executor, window_s: float = SERVED_WINDOW_S) -> list[str]:
    """The GPU types some scheduler has said it serves within the last `window_s` seconds."""
    rows = await db.fetch(
        """
        SELECT DISTINCT gpu FROM served_gpus
        WHERE seen_at > now() - make_interval(secs => $1) ORDER BY gpu
        """,
        window_s,
    )
    return [r["gpu"] for r in rows]
