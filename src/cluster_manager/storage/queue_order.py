"""Where a GPU type's queued jobs stand: the line the scheduler claims from, and each job's
place in it as users are shown."""

from __future__ import annotations

from cluster_manager.storage.database import Executor

# The order a GPU's queued jobs start in: by priority (reruns and throttle retries wait behind
# everyone's own jobs), then in turns, then by age. A job's turn counts its user's open
# submissions on the GPU, running ones first: a user with one running waits behind everyone
# with none (a ranked submission's public and secret runs share a turn). One user's burst of
# submissions holds back nobody else's next one.
IN_LINE = """
    SELECT * FROM (
        SELECT j.id, j.gpu, j.priority, j.submission_id, j.state,
               dense_rank() OVER (
                   PARTITION BY j.gpu, j.priority, s.user_id
                   ORDER BY j.state = 'queued', j.submission_id
               ) AS turn
        FROM jobs j JOIN submissions s ON s.id = j.submission_id
        WHERE j.state IN ('queued', 'claimed', 'dispatched')
    ) open_jobs WHERE state = 'queued'
"""
# Each queued job's place in its GPU's line: 1 starts next.
POSITIONS = f"""
    SELECT id, row_number() OVER (PARTITION BY gpu ORDER BY priority, turn, id) AS position
    FROM ({IN_LINE}) turns
"""


async def queue_position(db: Executor, job_id: int) -> int | None:
    """1 for the next job its GPU will start; None once it has left the queue."""
    position: int | None = await db.fetchval(
        f"""
        SELECT position FROM ({POSITIONS}) line WHERE id = $1
        """,
        job_id,
    )
    return position
