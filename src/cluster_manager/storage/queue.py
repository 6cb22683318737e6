"""The queue as users see it: per GPU type, jobs waiting and running and whether a scheduler
serves it; a user's own open jobs with their places in line."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_manager.storage.database import Executor
from cluster_manager.storage.queue_order import POSITIONS
from cluster_manager.storage.served import SERVED_WINDOW_S


@dataclass(frozen=True)
class GpuQueue:
    gpu: str
    queued: int
    running: int
    served: bool  # a live scheduler has said it runs this type (storage.served)


@dataclass(frozen=True)
class OpenJob:
    job_id: int
    submission_id: int
    leaderboard: str
    gpu: str
    secret: bool
    state: str  # queued, claimed or dispatched
    position: int | None  # in its GPU's line, while queued


async def queues(db: Executor, window_s: float = SERVED_WINDOW_S) -> list[GpuQueue]:
    """Every GPU type a leaderboard runs on or a job waits for, with its counts and whether
    a scheduler has served it within `window_s` seconds."""
    rows = await db.fetch(
        """
        WITH gpus AS (
            SELECT gpu FROM leaderboard_gpus
            UNION SELECT gpu FROM jobs WHERE state IN ('queued', 'claimed', 'dispatched')
        )
        SELECT g.gpu,
               (SELECT count(*) FROM jobs j WHERE j.gpu = g.gpu AND j.state = 'queued') AS queued,
               (SELECT count(*) FROM jobs j WHERE j.gpu = g.gpu
                  AND j.state IN ('claimed', 'dispatched')) AS running,
               EXISTS (SELECT 1 FROM served_gpus s WHERE s.gpu = g.gpu
                  AND s.seen_at > now() - make_interval(secs => $1)) AS served
        FROM gpus g ORDER BY g.gpu
        """,
        window_s,
    )
    return [GpuQueue(r["gpu"], r["queued"], r["running"], r["served"]) for r in rows]


async def open_jobs_of(db: Executor, external_id: str) -> list[OpenJob]:
    rows = await db.fetch(
        f"""
        SELECT j.id, j.submission_id, l.name AS leaderboard, j.gpu, j.secret, j.state,
               line.position
        FROM jobs j
        LEFT JOIN ({POSITIONS}) line ON line.id = j.id
        JOIN submissions s ON s.id = j.submission_id
        JOIN leaderboards l ON l.id = s.leaderboard_id
        JOIN users u ON u.id = s.user_id
        WHERE u.external_id = $1 AND j.state IN ('queued', 'claimed', 'dispatched')
        ORDER BY j.id
        """,
        external_id,
    )
    return [
        OpenJob(
            r["id"],
            r["submission_id"],
            r["leaderboard"],
            r["gpu"],
            r["secret"],
            r["state"],
            r["position"],
        )
        for r in rows
    ]
