"""Run results, written exactly once per job, and the rankings they feed."""

from __future__ import annotations

import asyncpg

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.ranked_pairs import pair_score
from cluster_manager.core.records import Job, RunRecord
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sandboxing import ranking_hold
from cluster_manager.core.telemetry import DEFAULT_THROTTLE_THRESHOLD as DEFAULT_THROTTLE_THRESHOLD
from cluster_manager.storage import ended_totals, throttling
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.controls import NOT_BANNED_R
from cluster_manager.storage.database import Connection, Executor
from cluster_manager.storage.history import bump_history

# The rankings' reads live in storage/rankings.py; callers know them from here as well.
from cluster_manager.storage.rankings import rank_of as rank_of
from cluster_manager.storage.rankings import ranking as ranking


async def record_run(
    conn: Connection,
    *,
    job: Job,
    owner: str,
    result: RunResult,
    allow_unsandboxed: bool = False,
    throttle_threshold: float | None = DEFAULT_THROTTLE_THRESHOLD,
) -> bool:
    """Stores the job's result, updates the ranking and counts the job among the ended ones
    (storage.ended_totals), all or nothing.

    A ranked pair whose runs were not both fully sandboxed is stored but not ranked, unless
    the operator allows it (`allow_unsandboxed`); so is a ranked run whose GPU throttled in
    more than `throttle_threshold` of its samples, and its pair is retried once
    (storage.throttling).

    Returns False (and writes nothing) when this owner no longer holds the job, e.g. because
    another worker took it over and already recorded it: results are written exactly once.
    """
    async with conn.transaction():
        # Serialises the two ranked jobs (public, secret) of one submission: whichever
        # finishes second sees the other's run and can rank the pair.
        submission = await conn.fetchrow(
            "SELECT leaderboard_id, user_id, submitted_at, after_deadline FROM submissions"
            " WHERE id = $1 FOR UPDATE",
            job.submission_id,
        )
        if submission is None:
            return False
        if not await job_store.finish(conn, job_id=job.id, owner=owner):
            return False
        result, retry = await throttling.hold_if_throttled(conn, job, result, throttle_threshold)
        inserted = await _insert_run(conn, job, submission, result)
        if inserted:
            if retry:
                await throttling.retry_pair(conn, job)
            if job.mode is Mode.LEADERBOARD:
                await _rank_after(conn, job, submission, allow_unsandboxed)
        # Last: the job is finished whether or not its run was new, and the totals' rows stay
        # locked until the commit.
        await ended_totals.count_finished(conn, job.id)
    return inserted


async def _insert_run(
    conn: Connection, job: Job, submission: asyncpg.Record, result: RunResult
) -> bool:
    """The job's run, unless it has one already."""
    inserted = await conn.fetchval(
        """
        INSERT INTO runs (job_id, submission_id, leaderboard_id, user_id, gpu, mode, secret,
                          passed, verdict, score, result, system)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
        ON CONFLICT (job_id) DO NOTHING
        RETURNING id
        """,
        job.id,
        job.submission_id,
        submission["leaderboard_id"],
        submission["user_id"],
        job.gpu,
        job.mode.value,
        job.secret,
        result.passed,
        result.verdict.value,
        result.score,
        result.to_json(),
        result.system,
    )
    return inserted is not None


async def _rank_after(
    conn: Connection, job: Job, submission: asyncpg.Record, allow_unsandboxed: bool
) -> None:
    """The ranking once a ranked job's run is stored: its pair (or its throttle retry's)
    ranked if it improves the user's best; a rerun's complete pair replaces the old score,
    better or worse."""
    generation = await throttling.generation_of(conn, job.id)
    if generation.stands_for_own_run:
        await _rank_pair(
            conn,
            job.submission_id,
            job.gpu,
            submission,
            allow_unsandboxed,
            generation=generation.number,
        )
    elif await _pair_complete(conn, job.submission_id, job.gpu, generation.number):
        await rerank_user(
            conn,
            leaderboard_id=submission["leaderboard_id"],
            user_id=submission["user_id"],
            allow_unsandboxed=allow_unsandboxed,
        )


async def _pair_complete(conn: Connection, submission_id: int, gpu: str, generation: int) -> bool:
    count: int = await conn.fetchval(
        "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id"
        " WHERE r.submission_id = $1 AND r.gpu = $2 AND r.mode = 'leaderboard' AND j.rerun = $3",
        submission_id,
        gpu,
        generation,
    )
    return count == 2


async def _rank_pair(
    conn: Connection,
    submission_id: int,
    gpu: str,
    submission: asyncpg.Record,
    allow_unsandboxed: bool,
    *,
    record_history: bool = True,
    generation: int = 0,
) -> None:
    """Ranks the pair's score (core.ranked_pairs: the worse of the two) once both the public
    run and the secret re-run passed on this GPU and neither is held; an improvement is also
    kept in the ranking's history (`ranking_events`). An invalidated submission ranks
    nowhere; one made after the deadline ranks among those alone, outside the history."""
    if await conn.fetchval(
        "SELECT invalidated_at IS NOT NULL FROM submissions WHERE id = $1", submission_id
    ):
        return
    pair = await conn.fetch(
        """
        SELECT r.secret, r.passed, r.score, r.system,
               coalesce(r.result->>'review', '') AS review
        FROM runs r JOIN jobs j ON j.id = r.job_id
        WHERE r.submission_id = $1 AND r.gpu = $2 AND r.mode = 'leaderboard' AND j.rerun = $3
        """,
        submission_id,
        gpu,
        generation,
    )
    public = next((r for r in pair if not r["secret"]), None)
    secret = next((r for r in pair if r["secret"]), None)
    if public is None or secret is None or not public["passed"] or not secret["passed"]:
        return
    score = pair_score(public["score"], secret["score"])
    if score is None:
        return
    for run in (public, secret):
        if ranking_hold(run["system"], allow_unsandboxed=allow_unsandboxed, review=run["review"]):
            return
    improved = await conn.fetchval(
        """
        INSERT INTO rankings (leaderboard_id, gpu, user_id, submission_id, score, submitted_at,
                              after_deadline)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (leaderboard_id, gpu, user_id, after_deadline) DO UPDATE
            SET submission_id = EXCLUDED.submission_id, score = EXCLUDED.score,
                submitted_at = EXCLUDED.submitted_at
            WHERE EXCLUDED.score < rankings.score
        RETURNING submission_id
        """,
        submission["leaderboard_id"],
        gpu,
        submission["user_id"],
        submission_id,
        score,
        submission["submitted_at"],
        submission["after_deadline"],
    )
    if improved is not None and record_history and not submission["after_deadline"]:
        await _record_improvement(conn, submission, gpu, submission_id, score)


async def _record_improvement(
    conn: Connection, submission: asyncpg.Record, gpu: str, submission_id: int, score: float
) -> None:
    """An improvement of a user's best, kept for the charts (which it changes)."""
    await bump_history(conn, submission["leaderboard_id"])
    await conn.execute(
        """
        INSERT INTO ranking_events (leaderboard_id, gpu, user_id, submission_id, score)
        VALUES ($1, $2, $3, $4, $5)
        """,
        submission["leaderboard_id"],
        gpu,
        submission["user_id"],
        submission_id,
        score,
    )


async def rerank_user(
    conn: Connection, *, leaderboard_id: int, user_id: int, allow_unsandboxed: bool
) -> None:
    """Rebuilds one user's ranking rows on a leaderboard from their stored runs (after one of
    their submissions is deleted, invalidated or restored): the best pair that still counts on
    each GPU."""
    await conn.execute(
        "DELETE FROM rankings WHERE leaderboard_id = $1 AND user_id = $2", leaderboard_id, user_id
    )
    # Each submission counts with its latest generation whose pair is complete (a rerun
    # still running leaves the previous one in place).
    pairs = await conn.fetch(
        """
        SELECT DISTINCT ON (r.submission_id, r.gpu)
               r.submission_id, r.gpu, j.rerun AS generation,
               s.leaderboard_id, s.user_id, s.submitted_at, s.after_deadline
        FROM runs r
        JOIN jobs j ON j.id = r.job_id
        JOIN submissions s ON s.id = r.submission_id
        WHERE r.leaderboard_id = $1 AND r.user_id = $2 AND r.mode = 'leaderboard'
              AND s.invalidated_at IS NULL
        GROUP BY r.submission_id, r.gpu, j.rerun, s.leaderboard_id, s.user_id, s.submitted_at,
                 s.after_deadline
        HAVING count(*) = 2
        ORDER BY r.submission_id, r.gpu, j.rerun DESC
        """,
        leaderboard_id,
        user_id,
    )
    for pair in pairs:  # their improvements are in the history already
        await _rank_pair(
            conn,
            pair["submission_id"],
            pair["gpu"],
            pair,
            allow_unsandboxed,
            record_history=False,
            generation=pair["generation"],
        )


_SELECT_RUN = """
    SELECT r.job_id, r.submission_id, l.name AS leaderboard, u.external_id AS user_name, r.gpu,
           r.mode, r.secret, r.passed, r.verdict, r.score, s.file_name, s.submitted_at,
           r.created_at, r.result
    FROM runs r
    JOIN submissions s ON s.id = r.submission_id
    JOIN leaderboards l ON l.id = r.leaderboard_id
    JOIN users u ON u.id = r.user_id
"""


async def is_ranked(db: Executor, submission_id: int) -> bool:
    """Whether the submission is some user's ranked best (on any GPU)."""
    found: bool = await db.fetchval(
        f"SELECT EXISTS (SELECT 1 FROM rankings r WHERE r.submission_id = $1 AND {NOT_BANNED_R})",
        submission_id,
    )
    return found


def _run(row: asyncpg.Record) -> RunRecord:
    return RunRecord(
        job_id=row["job_id"],
        submission_id=row["submission_id"],
        leaderboard=row["leaderboard"],
        user=row["user_name"],
        gpu=row["gpu"],
        mode=Mode(row["mode"]),
        secret=row["secret"],
        passed=row["passed"],
        verdict=Verdict(row["verdict"]),
        score=row["score"],
        file_name=row["file_name"],
        submitted_at=row["submitted_at"],
        created_at=row["created_at"],
        result=row["result"],
    )


async def runs_of_user(db: Executor, *, leaderboard_id: int, user_id: int) -> list[RunRecord]:
    rows = await db.fetch(
        _SELECT_RUN + " WHERE r.leaderboard_id = $1 AND r.user_id = $2 ORDER BY r.created_at",
        leaderboard_id,
        user_id,
    )
    return [_run(r) for r in rows]


async def runs_of_submission(db: Executor, submission_id: int) -> list[RunRecord]:
    rows = await db.fetch(
        _SELECT_RUN + " WHERE r.submission_id = $1 ORDER BY r.job_id", submission_id
    )
    return [_run(r) for r in rows]


async def verdict_of_job(db: Executor, job_id: int) -> str | None:
    verdict: str | None = await db.fetchval("SELECT verdict FROM runs WHERE job_id = $1", job_id)
    return verdict


async def ranked_pairs(
    db: Executor, *, leaderboard_id: int, user_id: int | None, submission_id: int | None
) -> list[tuple[int, str]]:
    """(submission id, GPU) of the ranking's entries on a leaderboard, optionally only one
    user's or one submission's."""
    rows = await db.fetch(
        """
        SELECT submission_id, gpu FROM rankings
        WHERE leaderboard_id = $1 AND ($2::bigint IS NULL OR user_id = $2)
          AND ($3::bigint IS NULL OR submission_id = $3)
        ORDER BY score, submission_id, gpu
        """,
        leaderboard_id,
        user_id,
        submission_id,
    )
    return [(r["submission_id"], r["gpu"]) for r in rows]
