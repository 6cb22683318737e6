"""The durable job queue: `FOR UPDATE SKIP LOCKED` claims with leases and heartbeats.

A worker claims queued jobs (at most the GPU type's concurrency, counted under a per-GPU
advisory lock so two workers cannot both take the last slot), records the external id it will
use *before* dispatching, and renews its leases while it follows the runs. When a worker dies
its leases expire and another worker takes the jobs over: a job that already has an external
id is re-attached, never dispatched twice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Sequence
from typing import NamedTuple

import asyncpg

from cluster_manager.core.models import Mode
from cluster_manager.core.records import Job, JobEvent, JobState
from cluster_manager.storage.database import Connection, Executor, without_nul
from cluster_manager.storage.ended_totals import COUNT_FAILED
from cluster_manager.storage.queue_order import IN_LINE

EVENTS_CHANNEL = "cm_job_events"
MAX_DETAIL_CHARS = 1000
MAX_ERROR_CHARS = 4000
NEW_JOBS_CHANNEL = "cm_new_jobs"

JOB_COLUMNS = """
    id, submission_id, gpu, mode, secret, state, launcher, external_id, attempts,
    lease_owner, error, dispatched_at, heartbeat_at
"""


def job_from_row(row: asyncpg.Record) -> Job:
    return Job(
        id=row["id"],
        submission_id=row["submission_id"],
        gpu=row["gpu"],
        mode=Mode(row["mode"]),
        secret=row["secret"],
        state=JobState(row["state"]),
        launcher=row["launcher"],
        external_id=row["external_id"],
        attempts=row["attempts"],
        lease_owner=row["lease_owner"],
        error=row["error"],
        dispatched_at=row["dispatched_at"],
        heartbeat_at=row["heartbeat_at"],
    )


async def enqueue(
    conn: Connection, submission_id: int, specs: Sequence[tuple[str, Mode, bool]]
) -> list[Job]:
    """One job per (gpu, mode, secret). Call inside the submission's transaction."""
    rows = await conn.fetch(
        f"""
        INSERT INTO jobs (submission_id, gpu, mode, secret)
        SELECT $1, s.gpu, s.mode, s.secret
        FROM unnest($2::text[], $3::text[], $4::bool[]) AS s(gpu, mode, secret)
        RETURNING {JOB_COLUMNS}
        """,
        submission_id,
        [gpu for gpu, _, _ in specs],
        [mode.value for _, mode, _ in specs],
        [secret for _, _, secret in specs],
    )
    await conn.execute("SELECT pg_notify($1, '')", NEW_JOBS_CHANNEL)
    return [job_from_row(r) for r in rows]


RERUN_PRIORITY = 1  # behind every submission's own jobs


async def enqueue_rerun(
    conn: Connection,
    submission_id: int,
    gpu: str,
    *,
    priority: int = RERUN_PRIORITY,
    retry_of: int | None = None,
) -> list[Job]:
    """The ranked pair (public run, secret re-run) of a submission on `gpu` once more, as a
    new generation queued behind everyone's own jobs (at `priority`); `retry_of` marks it as
    the throttle retry of that generation. Call in a transaction."""
    rows = await conn.fetch(
        f"""
        WITH generation AS (
            SELECT coalesce(max(rerun), 0) + 1 AS n FROM jobs
            WHERE submission_id = $1 AND gpu = $2
        )
        INSERT INTO jobs (submission_id, gpu, mode, secret, rerun, priority, retry_of)
        SELECT $1, $2, 'leaderboard', s.secret, generation.n, $3, $4
        FROM generation, unnest(ARRAY[false, true]) AS s(secret)
        RETURNING {JOB_COLUMNS}
        """,
        submission_id,
        gpu,
        priority,
        retry_of,
    )
    await conn.execute("SELECT pg_notify($1, '')", NEW_JOBS_CHANNEL)
    return [job_from_row(r) for r in rows]


async def lock_gpu(conn: Connection, gpu: str) -> None:
    """Serialises whoever takes a slot of `gpu` (a claim, a script run) until the transaction
    ends, so two cannot both take the last one."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('cm-gpu:' || $1))", gpu)


async def active_on_gpu(db: Executor, gpu: str) -> int:
    """Slots of `gpu` in use: jobs in flight and script runs whose holder is alive."""
    active: int = await db.fetchval(
        """
        SELECT (SELECT count(*) FROM jobs WHERE gpu = $1 AND state IN ('claimed', 'dispatched'))
             + (SELECT count(*) FROM script_runs
                WHERE gpu = $1 AND finished_at IS NULL AND lease_expires_at > now())
        """,
        gpu,
    )
    return active


async def claim(
    pool: asyncpg.Pool,
    *,
    owner: str,
    gpu: str,
    max_active: int,
    lease_s: float,
    limit: int,
    submission_ids: Collection[int] | None = None,
) -> list[Job]:
    """Claims up to `limit` queued jobs of `gpu`, never exceeding `max_active` in flight
    (script runs holding a slot included).
    With `submission_ids`, only jobs of those submissions (a CLI serving its own). Jobs start
    in `IN_LINE`'s order; the GPU's lock serialises claims, and each row's state is read again
    as it is claimed, so a job that left the queue meanwhile stays where it went."""
    async with pool.acquire() as conn, conn.transaction():
        await lock_gpu(conn, gpu)
        active = await active_on_gpu(conn, gpu)
        room = min(limit, max_active - active)
        if room <= 0:
            return []
        rows = await conn.fetch(
            f"""
            UPDATE jobs SET state = 'claimed', lease_owner = $1,
                lease_expires_at = now() + make_interval(secs => $2),
                heartbeat_at = now(), claimed_at = now(), attempts = attempts + 1
            WHERE state = 'queued' AND id IN (
                SELECT id FROM ({IN_LINE}) line WHERE gpu = $3
                  AND ($5::bigint[] IS NULL OR submission_id = ANY($5::bigint[]))
                ORDER BY priority, turn, id LIMIT $4)
            RETURNING {JOB_COLUMNS}
            """,
            owner,
            lease_s,
            gpu,
            room,
            None if submission_ids is None else list(submission_ids),
        )
    return sorted((job_from_row(r) for r in rows), key=lambda j: j.id)


class Adopted(NamedTuple):
    job: Job
    previous_owner: str | None  # the scheduler that stopped renewing its lease


async def take_over_expired(
    pool: asyncpg.Pool, *, owner: str, lease_s: float, gpus: Sequence[str]
) -> list[Adopted]:
    """Adopts in-flight jobs whose owner stopped renewing its lease (it died)."""
    rows = await pool.fetch(
        f"""
        WITH expired AS (
            SELECT id AS expired_id, lease_owner AS previous_owner FROM jobs
            WHERE state IN ('claimed', 'dispatched') AND lease_expires_at < now()
              AND gpu = ANY($3::text[])
            FOR UPDATE SKIP LOCKED)
        UPDATE jobs SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2),
            heartbeat_at = now()
        FROM expired WHERE id = expired_id
        RETURNING {JOB_COLUMNS}, previous_owner
        """,
        owner,
        lease_s,
        list(gpus),
    )
    adopted = (Adopted(job_from_row(r), r["previous_owner"]) for r in rows)
    return sorted(adopted, key=lambda a: a.job.id)


async def renew_leases(
    pool: asyncpg.Pool, *, owner: str, job_ids: Sequence[int], lease_s: float
) -> set[int]:
    """Heartbeat: extends the leases still held; returns the ids this owner still holds."""
    rows = await pool.fetch(
        """
        UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $3), heartbeat_at = now()
        WHERE id = ANY($2::bigint[]) AND lease_owner = $1 AND state IN ('claimed', 'dispatched')
        RETURNING id
        """,
        owner,
        list(job_ids),
        lease_s,
    )
    return {r["id"] for r in rows}


async def set_external_id(
    pool: asyncpg.Pool, *, job_id: int, owner: str, launcher: str, external_id: str
) -> bool:
    """Records where the job will run, before dispatching it."""
    done = await pool.execute(
        """
        UPDATE jobs SET launcher = $3, external_id = $4
        WHERE id = $1 AND lease_owner = $2 AND state = 'claimed'
        """,
        job_id,
        owner,
        launcher,
        external_id,
    )
    return done.endswith(" 1")


async def mark_dispatched(
    pool: asyncpg.Pool, *, job_id: int, owner: str, external_id: str | None = None
) -> bool:
    """The launcher has the run. `external_id` replaces the dispatch key with the launcher's
    own id for it (a GitHub run id, a Slurm job id) when they differ."""
    done = await pool.execute(
        """
        UPDATE jobs SET state = 'dispatched', dispatched_at = coalesce(dispatched_at, now()),
            external_id = coalesce($3, external_id)
        WHERE id = $1 AND lease_owner = $2 AND state IN ('claimed', 'dispatched')
        """,
        job_id,
        owner,
        external_id,
    )
    return done.endswith(" 1")


async def finish(conn: Connection, *, job_id: int, owner: str) -> bool:
    """Marks the job finished if this owner still holds it. Call in the result transaction."""
    done = await conn.execute(
        """
        UPDATE jobs SET state = 'finished', finished_at = now(), lease_owner = NULL,
            lease_expires_at = NULL
        WHERE id = $1 AND lease_owner = $2 AND state IN ('claimed', 'dispatched')
        """,
        job_id,
        owner,
    )
    return done.endswith(" 1")


async def release(
    conn: Executor, *, job_id: int, owner: str, error: str, retry: bool
) -> JobState | None:
    """Gives a job up: back to the queue for another attempt, or failed for good (and then
    counted among the ended jobs, in the same statement)."""
    state = await conn.fetchval(
        f"""
        WITH ended AS (
            UPDATE jobs SET state = CASE WHEN $4 THEN 'queued' ELSE 'failed' END,
                error = $3, lease_owner = NULL, lease_expires_at = NULL,
                launcher = CASE WHEN $4 THEN NULL ELSE launcher END,
                external_id = CASE WHEN $4 THEN NULL ELSE external_id END,
                dispatched_at = CASE WHEN $4 THEN NULL ELSE dispatched_at END,
                finished_at = CASE WHEN $4 THEN NULL ELSE now() END
            WHERE id = $1 AND lease_owner = $2 AND state IN ('claimed', 'dispatched')
            RETURNING gpu, launcher, dispatched_at, state
        ),
        counted AS ({COUNT_FAILED})
        SELECT state FROM ended
        """,
        job_id,
        owner,
        without_nul(error)[:MAX_ERROR_CHARS],
        retry,
    )
    return None if state is None else JobState(state)


async def get_job(db: Executor, job_id: int) -> Job | None:
    row = await db.fetchrow(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1", job_id)
    return None if row is None else job_from_row(row)


async def jobs_of_submission(db: Executor, submission_id: int) -> list[Job]:
    rows = await db.fetch(
        f"SELECT {JOB_COLUMNS} FROM jobs WHERE submission_id = $1 ORDER BY id", submission_id
    )
    return [job_from_row(r) for r in rows]


async def queued_count(db: Executor, gpus: Sequence[str]) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE state = 'queued' AND gpu = ANY($1::text[])", list(gpus)
    )
    return count


async def open_count(
    db: Executor, job_ids: Collection[int], submission_ids: Collection[int] = ()
) -> int:
    """The jobs not yet finished or failed among `job_ids` and the jobs of `submission_ids`
    (which a result may have added to, e.g. a throttled ranked pair's retry)."""
    count: int = await db.fetchval(
        "SELECT count(*) FROM jobs"
        " WHERE (id = ANY($1::bigint[]) OR submission_id = ANY($2::bigint[]))"
        " AND state NOT IN ('finished', 'failed')",
        list(job_ids),
        list(submission_ids),
    )
    return count


async def publish(db: Executor, event: JobEvent) -> None:
    # NOTIFY payloads are capped at 8000 bytes: keep the detail short.
    if len(event.detail) > MAX_DETAIL_CHARS:
        event = dataclasses.replace(event, detail=event.detail[: MAX_DETAIL_CHARS - 1] + "…")
    payload = json.dumps(without_nul(event.to_json()))
    await db.execute("SELECT pg_notify($1, $2)", EVENTS_CHANNEL, payload)
