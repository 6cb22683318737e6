"""The running totals /metrics reads equal a full recount of the ended jobs: after every way a
job ends, after endings that overlap on two connections, and after migration 0023 counted the
jobs that had ended before it; and they never go down."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from yoyo import get_backend, read_migrations

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import Job
from cluster_manager.data import MIGRATIONS_DIR
from cluster_manager.service import Service
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import unserved
from cluster_manager.storage.ended_totals import RUN_SECONDS_BUCKETS
from cluster_manager.storage.migrations import yoyo_url
from tests.storage.helpers import (
    OWNER,
    claim_submission,
    dispatch,
    finish_submission,
    make_board,
    record,
    run_result,
    submit,
)
from tests.support.ended_recount import RECOUNT_ENDED

MIGRATION = "0023.ended-job-totals"

RECOUNT_SECONDS = """
    SELECT gpu, greatest(extract(epoch FROM finished_at - dispatched_at) * 1000000, 0)::bigint
           AS us
    FROM jobs WHERE state = 'finished' AND dispatched_at IS NOT NULL AND finished_at IS NOT NULL
"""

Counts = tuple[dict[tuple[str, str, str], int], dict[tuple[str, float], tuple[int, int]]]


async def recount(db: Any) -> Counts:
    ended = {(r["gpu"], r["launcher"], r["outcome"]): r["n"] for r in await db.fetch(RECOUNT_ENDED)}
    seconds: dict[tuple[str, float], tuple[int, int]] = {}
    for r in await db.fetch(RECOUNT_SECONDS):
        le = min((b for b in RUN_SECONDS_BUCKETS if b * 1e6 >= r["us"]), default=float("inf"))
        runs, total = seconds.get((r["gpu"], le), (0, 0))
        seconds[r["gpu"], le] = (runs + 1, total + r["us"])
    return ended, seconds


async def totals(db: Any) -> Counts:
    ended = {
        (r["gpu"], r["launcher"], r["outcome"]): r["jobs"]
        for r in await db.fetch("SELECT * FROM ended_job_totals")
    }
    seconds = {
        (r["gpu"], r["le"]): (r["runs"], r["total_us"])
        for r in await db.fetch("SELECT * FROM run_seconds_totals")
    }
    return ended, seconds


async def claimed(service: Service, pool: asyncpg.Pool, gpu: str = "CPU") -> Job:
    receipt = await submit(service, gpus=[gpu], mode=Mode.TEST)
    return (await claim_submission(pool, receipt.submission_id))[gpu, False]


async def give_up(pool: asyncpg.Pool, job: Job, *, retry: bool = False) -> None:
    assert await job_store.release(pool, job_id=job.id, owner=OWNER, error="gave up", retry=retry)


async def end_every_way(service: Service, pool: asyncpg.Pool) -> None:
    """Jobs on two GPU types ended each way a job can end, one given up for a retry first."""
    await make_board(service, gpus=("CPU", "H100"))
    for gpu in ("CPU", "H100"):
        assert await record(pool, await dispatch(pool, await claimed(service, pool, gpu)))
        failed = await dispatch(pool, await claimed(service, pool, gpu))
        assert await record(pool, failed, passed=False, verdict=Verdict.WRONG_ANSWER)
        timed_out = await dispatch(pool, await claimed(service, pool, gpu))
        assert await record(pool, timed_out, passed=False, verdict=Verdict.TIMEOUT)
        await give_up(pool, await dispatch(pool, await claimed(service, pool, gpu)))  # lost
    refused = await claimed(service, pool)
    assert await job_store.set_external_id(
        pool, job_id=refused.id, owner=OWNER, launcher="fake", external_id="refused"
    )
    await give_up(pool, refused)  # the launcher never took it: a dispatch error
    await give_up(pool, await claimed(service, pool), retry=True)  # queued again: not ended
    await submit(service, gpus=["H100"], mode=Mode.TEST)
    assert await unserved.fail_jobs(pool, gpu="H100", error="unserved", window_s=0)
    # A ranked pair: its runs go through the ranking in the same transaction.
    ranked = await submit(service, gpus=["CPU"])
    await finish_submission(pool, ranked, secret_passed=False)


async def test_the_totals_equal_a_recount_after_every_way_a_job_ends(service, pool):
    await end_every_way(service, pool)
    ended, seconds = await totals(pool)
    assert (ended, seconds) == await recount(pool)
    assert ended == {
        ("CPU", "fake", "passed"): 2,
        ("CPU", "fake", "wrong_answer"): 2,
        ("CPU", "fake", "timeout"): 1,
        ("CPU", "fake", "lost"): 1,
        ("CPU", "fake", "dispatch_error"): 1,
        ("H100", "fake", "passed"): 1,
        ("H100", "fake", "wrong_answer"): 1,
        ("H100", "fake", "timeout"): 1,
        ("H100", "fake", "lost"): 1,
        ("H100", "", "not_dispatched"): 1,
    }
    assert sum(runs for runs, _ in seconds.values()) == 8  # every finished job, dispatched

    # A deleted submission's jobs leave the recount, never the totals.
    await pool.execute("DELETE FROM submissions")
    assert await totals(pool) == (ended, seconds)
    assert await recount(pool) == ({}, {})


async def test_endings_that_overlap_on_two_connections_both_count(service, pool):
    await make_board(service, gpus=("CPU",))
    first = await dispatch(pool, await claimed(service, pool))
    second = await dispatch(pool, await claimed(service, pool))
    async with pool.acquire() as a, pool.acquire() as b:
        held = a.transaction()
        await held.start()
        result = run_result(mode=Mode.TEST)
        assert await run_store.record_run(a, job=first, owner=OWNER, result=result)
        # The same GPU, launcher and verdict: the second waits on the first's total row.
        other = asyncio.create_task(run_store.record_run(b, job=second, owner=OWNER, result=result))
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
        )
        async with asyncio.timeout(30):
            while not await pool.fetchval(waiting, b.get_server_pid()):
                await asyncio.sleep(0.01)
        await held.commit()
        assert await asyncio.wait_for(other, 30)
    ended, _ = await totals(pool)
    assert ended == {("CPU", "fake", "passed"): 2}

    # Many at once, each way, on as many connections.
    jobs = [await dispatch(pool, await claimed(service, pool)) for _ in range(12)]
    endings = [
        record(pool, job, passed=i % 3 != 1, verdict=None if i % 3 != 1 else Verdict.TIMEOUT)
        for i, job in enumerate(jobs[:9])
    ] + [give_up(pool, job) for job in jobs[9:]]
    await asyncio.gather(*endings)
    ended, seconds = await totals(pool)
    assert (ended, seconds) == await recount(pool)
    assert ended == {
        ("CPU", "fake", "passed"): 8,
        ("CPU", "fake", "timeout"): 3,
        ("CPU", "fake", "lost"): 3,
    }


def _walk_migration(url: str) -> bool:
    """Rolls the totals' migration back and applies it again; whether its tables were gone
    in between."""
    backend = get_backend(yoyo_url(url))
    try:
        (migration,) = [m for m in read_migrations(str(MIGRATIONS_DIR)) if m.id == MIGRATION]
        backend.rollback_one(migration)
        cursor = backend.connection.cursor()
        cursor.execute("SELECT to_regclass('ended_job_totals') IS NULL")
        gone: bool = cursor.fetchone()[0]
        backend.apply_one(migration)
        return gone
    finally:
        backend.connection.close()


@pytest.mark.fresh_db("it rolls a migration back")
async def test_the_migration_counts_the_jobs_that_ended_before_it(service, pool, db_url):
    await end_every_way(service, pool)
    before = await totals(pool)
    assert before[0] and before[1]
    assert await asyncio.to_thread(_walk_migration, db_url)
    async with pool.acquire() as fresh:  # statements prepared on the old tables are stale
        await fresh.reload_schema_state()
        assert await totals(fresh) == before == await recount(fresh)
