"""Ranked runs on a GPU that throttled: stored with the reason they are not ranked (their
`review`, the one mechanism that holds a stored score out of the rankings), and their ranked
pair run once more, once, as a new generation of its jobs (`jobs.retry_of`).

The threshold is the operator's (CLUSTER_MANAGER_THROTTLE_THRESHOLD), applied here when the
result is stored: the runner only reports what it sampled.
"""

from __future__ import annotations

import dataclasses

from cluster_manager.core.models import Mode
from cluster_manager.core.records import Job
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.telemetry import throttling
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.database import Connection

# Ahead of admin reruns: the retry stands in for the submission's own run.
RETRY_PRIORITY = 0


@dataclasses.dataclass(frozen=True)
class Generation:
    """Which generation of a submission's ranked jobs a job belongs to (0: its own run), and
    the generation it retries when it is a throttle retry."""

    number: int
    retry_of: int | None

    @property
    def stands_for_own_run(self) -> bool:
        """The submission's own run, or the throttle retry of it: ranked if it improves the
        user's best (a rerun's pair instead replaces the old score)."""
        return self.number == 0 or self.retry_of == 0


async def generation_of(conn: Connection, job_id: int) -> Generation:
    row = await conn.fetchrow("SELECT rerun, retry_of FROM jobs WHERE id = $1", job_id)
    assert row is not None, f"job {job_id} vanished inside its own transaction"
    return Generation(row["rerun"], row["retry_of"])


async def hold_if_throttled(
    conn: Connection, job: Job, result: RunResult, threshold: float | None
) -> tuple[RunResult, bool]:
    """The result to store, with why it is not ranked when its GPU throttled in more than
    `threshold` of the samples (None: no such rule), and whether its pair is to be retried:
    the first time a generation throttles, never for a retry. Call in the result's
    transaction (the submission's row locked: its two ranked runs are judged in turn)."""
    if job.mode is not Mode.LEADERBOARD or threshold is None or not result.passed:
        return result, False
    reason = throttling(result.telemetry, threshold)
    if reason is None:
        return result, False
    generation = await generation_of(conn, job.id)
    if generation.retry_of is not None:
        note = f"not ranked: {reason}, also on its retry"
        retry = False
    else:
        note = f"not ranked: {reason}; the run is retried once"
        retry = not await _retried(conn, job, generation.number)
    review = f"{result.review}; {note}" if result.review else note
    return dataclasses.replace(result, review=review, throttled=note), retry


async def retry_pair(conn: Connection, job: Job) -> list[Job]:
    """The job's ranked pair as a new generation, marked as the retry of the job's own."""
    generation = await generation_of(conn, job.id)
    return await job_store.enqueue_rerun(
        conn,
        job.submission_id,
        job.gpu,
        priority=RETRY_PRIORITY,
        retry_of=generation.number,
    )


async def _retried(conn: Connection, job: Job, generation: int) -> bool:
    """Whether the other run of the pair already had the generation retried."""
    found: bool = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM jobs"
        " WHERE submission_id = $1 AND gpu = $2 AND retry_of = $3)",
        job.submission_id,
        job.gpu,
        generation,
    )
    return found
