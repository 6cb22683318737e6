"""The running totals /metrics reads (storage.metrics says why they exist): each job is added
once, by the transaction that ends it, to `ended_job_totals` and, when it finished after a
dispatch, to `run_seconds_totals`.

Every way a job ends goes through here: a recorded result (`count_finished`, at the end of
`runs.record_run`'s transaction) and a job given up (`jobs.release` without a retry: lost or a
dispatch error) or failed unserved (`unserved.fail_jobs`: not dispatched), each counted by
`COUNT_FAILED` in the very statement that fails it. Nothing changes an ended job's outcome
afterwards (a rerun is a new generation of jobs), and a deleted job stays counted.

Two endings of the same key wait for each other's commit on its row: each count is its
transaction's last write, so the wait is one commit's length.
"""

from __future__ import annotations

from cluster_manager.storage.database import Connection

# Upper bounds (seconds) of the run time histogram's buckets: a quick test run on a local GPU
# to a ranked run queued behind a GitHub runner's start. Migration 0023 holds them too.
RUN_SECONDS_BUCKETS: tuple[float, ...] = (
    *(1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0),
    *(120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0),
)

# How a failed job (given up, no run) ended, from what the queue recorded on it: a launcher
# that never took it (its last attempt recorded the launcher, never its dispatch), a run that
# was dispatched and lost, or no dispatch at all (nothing served the type, no request).
DISPATCH_ERROR = "dispatch_error"
LOST = "lost"
NOT_DISPATCHED = "not_dispatched"

# The rows a statement failed, counted: a data-modifying step of that statement, reading the
# rows its `ended` step returned (gpu, launcher, dispatched_at, state), so the job and its
# count are written together. In key order, as every count takes its rows' locks.
COUNT_FAILED = f"""
    INSERT INTO ended_job_totals AS t (gpu, launcher, outcome, jobs)
    SELECT gpu, coalesce(launcher, ''),
           CASE WHEN dispatched_at IS NOT NULL THEN '{LOST}'
                WHEN launcher IS NOT NULL THEN '{DISPATCH_ERROR}'
                ELSE '{NOT_DISPATCHED}' END,
           count(*)
    FROM ended WHERE state = 'failed'
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (gpu, launcher, outcome) DO UPDATE SET jobs = t.jobs + excluded.jobs
"""


async def count_finished(conn: Connection, job_id: int) -> None:
    """Adds a finished job, with its stored run's verdict, and its run time. Call last in the
    transaction that finished it: the rows' locks are held until it commits."""
    await conn.execute(
        """
        INSERT INTO ended_job_totals AS t (gpu, launcher, outcome, jobs)
        SELECT j.gpu, coalesce(j.launcher, ''), coalesce(r.verdict, 'unrecorded'), 1
        FROM jobs j LEFT JOIN runs r ON r.job_id = j.id
        WHERE j.id = $1 AND j.state = 'finished'
        ON CONFLICT (gpu, launcher, outcome) DO UPDATE SET jobs = t.jobs + 1
        """,
        job_id,
    )
    await conn.execute(
        """
        INSERT INTO run_seconds_totals AS t (gpu, le, runs, total_us)
        SELECT gpu,
               coalesce((SELECT min(b) FROM unnest($2::float8[]) AS b WHERE b * 1000000 >= us),
                        'Infinity'),
               1, us
        FROM (
            SELECT gpu,
                   greatest(extract(epoch FROM finished_at - dispatched_at) * 1000000, 0)::bigint
                   AS us
            FROM jobs
            WHERE id = $1 AND state = 'finished'
              AND dispatched_at IS NOT NULL AND finished_at IS NOT NULL
        ) finished
        ON CONFLICT (gpu, le) DO UPDATE
            SET runs = t.runs + 1, total_us = t.total_us + excluded.total_us
        """,
        job_id,
        list(RUN_SECONDS_BUCKETS),
    )
