"""Queued jobs of GPU types that no live scheduler serves (`served.py`): found, and failed
once they have waited too long, so that a submission to a type nobody runs gets an answer."""

from __future__ import annotations

from collections.abc import Sequence

from cluster_manager.core.records import Job
from cluster_manager.storage.database import Executor, without_nul
from cluster_manager.storage.ended_totals import COUNT_FAILED
from cluster_manager.storage.jobs import JOB_COLUMNS, MAX_ERROR_CHARS, job_from_row

# No scheduler has said within the window (storage.served) that it serves the job's GPU type.
_UNSERVED = """
    NOT EXISTS (SELECT 1 FROM served_gpus s
                WHERE s.gpu = j.gpu AND s.seen_at > now() - make_interval(secs => $1))
"""


async def queued_gpus(db: Executor, *, window_s: float, served: Sequence[str] = ()) -> list[str]:
    """GPU types with a queued job that no scheduler has served within `window_s` seconds,
    `served` (the asker's own) aside."""
    rows = await db.fetch(
        f"""
        SELECT DISTINCT j.gpu FROM jobs j
        WHERE j.state = 'queued' AND NOT (j.gpu = ANY($2::text[])) AND {_UNSERVED}
        ORDER BY j.gpu
        """,
        window_s,
        list(served),
    )
    return [r["gpu"] for r in rows]


async def fail_jobs(db: Executor, *, gpu: str, error: str, window_s: float) -> list[Job]:
    """Fails the jobs of `gpu` queued for over `window_s` seconds, unless a scheduler has
    served it within as long: the check is repeated here, under the rows' locks, so a job
    claimed meanwhile is left alone. A job put back for a retry counts from its last claim.
    The failed jobs are counted among the ended ones in the same statement."""
    rows = await db.fetch(
        f"""
        WITH ended AS (
            UPDATE jobs j SET state = 'failed', error = $3, finished_at = now()
            WHERE j.gpu = $2 AND j.state = 'queued'
              AND coalesce(j.claimed_at, j.created_at) < now() - make_interval(secs => $1)
              AND {_UNSERVED}
            RETURNING {JOB_COLUMNS}
        ),
        counted AS ({COUNT_FAILED})
        SELECT * FROM ended
        """,
        window_s,
        gpu,
        without_nul(error)[:MAX_ERROR_CHARS],
    )
    return sorted((job_from_row(r) for r in rows), key=lambda j: j.id)
