"""Quick script runs (`/run`): the slots they hold on a GPU type and the per-user count.

A script takes a slot of its GPU type's concurrency under the same per-GPU lock the job queue
claims under, and counts as in flight there until it finishes or its holder stops renewing.
"""

from __future__ import annotations

from datetime import datetime

from cluster_manager.storage.database import Connection, Executor
from cluster_manager.storage.jobs import active_on_gpu, lock_gpu


async def lock_user(conn: Connection, user_id: int) -> None:
    """One script start per user at a time, so two racing requests count each other."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('cm-script-user:' || $1))", str(user_id)
    )


async def started_since(db: Executor, *, user_id: int, since: datetime) -> list[datetime]:
    """Start times of one user's script runs since `since`, oldest first."""
    rows = await db.fetch(
        """
        SELECT started_at FROM script_runs WHERE user_id = $1 AND started_at >= $2
        ORDER BY started_at
        """,
        user_id,
        since,
    )
    return [r["started_at"] for r in rows]


async def take_slot(
    conn: Connection,
    *,
    user_id: int,
    gpu: str,
    max_active: int,
    lease_s: float,
    started_at: datetime,
) -> int | None:
    """Records a script run holding a slot of `gpu`, if one is free; its id, else None.
    Call inside a transaction."""
    await lock_gpu(conn, gpu)
    if await active_on_gpu(conn, gpu) >= max_active:
        return None
    script_id: int = await conn.fetchval(
        """
        INSERT INTO script_runs (user_id, gpu, started_at, lease_expires_at)
        VALUES ($1, $2, $3, now() + make_interval(secs => $4))
        RETURNING id
        """,
        user_id,
        gpu,
        started_at,
        lease_s,
    )
    return script_id


async def renew_slot(db: Executor, script_id: int, *, lease_s: float) -> None:
    await db.execute(
        """
        UPDATE script_runs SET lease_expires_at = now() + make_interval(secs => $2)
        WHERE id = $1 AND finished_at IS NULL
        """,
        script_id,
        lease_s,
    )


async def release_slot(db: Executor, script_id: int) -> None:
    await db.execute(
        """
        UPDATE script_runs SET finished_at = now(), lease_expires_at = NULL
        WHERE id = $1 AND finished_at IS NULL
        """,
        script_id,
    )
