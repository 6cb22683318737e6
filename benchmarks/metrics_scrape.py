"""metrics_scrape_ms: what `/metrics` reads from the database per scrape, on a long history.

One leaderboard on two GPU types (created through the service) gets 200,000 ended jobs,
inserted with one SQL statement, and a run for each finished one with another: nine in ten
finished (passed, wrong_answer or timeout, their run times spread from 0 to 4,000 s), the rest
failed (lost or a dispatch error). Migration 0023 is then rolled back and applied again, so it
counts them as it would on a database that had them before it (`backfill_s`).

Then `Service.monitoring.figures()` (everything a scrape reads: the queue, the schedulers, the
ended jobs' totals and the run time histogram) is timed over 200 calls after 20 warm-up
calls; figure: p95 (nearest rank). For comparison, `recount_ms` is the median of 5 full counts
of the same history, the way a scrape read it before the totals (storage.metrics' docstring).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import ghlib
from benchlib import Figure, log, median, percentile, report, scratch_database
from yoyo import get_backend, read_migrations

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.data import MIGRATIONS_DIR
from cluster_manager.service import Service, Submitter
from cluster_manager.storage.database import create_pool
from cluster_manager.storage.metrics import RUN_SECONDS_BUCKETS
from cluster_manager.storage.migrations import yoyo_url
from tests.support.ended_recount import RECOUNT_ENDED

GPUS = ("H100", "B200")
TOTALS_MIGRATION = "0023.ended-job-totals"
# A few reads of a few rows each; what a quiet 2-core VM does, with room for its noise.
TARGET_MS = 5.0
REGISTRY = GpuRegistry({g: GpuType(g, "local") for g in GPUS})

# Ended jobs of one submission, one generation (`rerun`) each: job i is on GPU i % 2, failed
# when i % 10 = 0 (lost when it had been dispatched), else finished after i % 4001 seconds.
INSERT_JOBS = """
    INSERT INTO jobs (submission_id, gpu, mode, secret, state, launcher, external_id, attempts,
                      created_at, claimed_at, dispatched_at, finished_at, rerun)
    SELECT $1, ($2::text[])[1 + i % 2], 'test', false,
           CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'finished' END, 'local', 'ext-' || i, 1,
           now() - interval '2 hours', now() - interval '2 hours',
           CASE WHEN i % 20 = 0 THEN NULL ELSE now() - make_interval(secs => i % 4001) END,
           now(), i
    FROM generate_series(1, $3) AS i
"""
INSERT_RUNS = """
    INSERT INTO runs (job_id, submission_id, leaderboard_id, user_id, gpu, mode, secret,
                      passed, verdict, score, result)
    SELECT j.id, j.submission_id, s.leaderboard_id, s.user_id, j.gpu, j.mode, j.secret,
           j.id % 3 = 0, (ARRAY['passed', 'wrong_answer', 'timeout'])[1 + j.id % 3],
           CASE WHEN j.id % 3 = 0 THEN 0.001 END, '{}'::jsonb
    FROM jobs j JOIN submissions s ON s.id = j.submission_id
    WHERE j.state = 'finished'
"""
# The reads the totals replace (storage/metrics.py before migration 0023): every ended job,
# with its run, counted afresh; then every finished one's run time, into buckets.
RECOUNT = (
    RECOUNT_ENDED + "ORDER BY 1, 2, 3",
    """
    SELECT gpu, width_bucket(-seconds, $1::float8[]) AS bounds_above, count(*) AS n,
           sum(seconds) AS total_s
    FROM (
        SELECT gpu, greatest(date_part('epoch', finished_at - dispatched_at), 0) AS seconds
        FROM jobs
        WHERE state = 'finished' AND dispatched_at IS NOT NULL AND finished_at IS NOT NULL
    ) finished
    GROUP BY gpu, bounds_above ORDER BY gpu
    """,
)


@dataclass(frozen=True)
class Scale:
    jobs: int = 200_000
    calls: int = 200
    warm_up: int = 20
    recounts: int = 5


# The suite's check (tests/test_benchmarks_import.py): a second.
TINY = Scale(jobs=200, calls=3, warm_up=1, recounts=1)


def count_again(url: str) -> float:
    """Seconds migration 0023 takes to count the jobs there, applied after a rollback."""
    backend = get_backend(yoyo_url(url))
    try:
        (migration,) = [m for m in read_migrations(str(MIGRATIONS_DIR)) if m.id == TOTALS_MIGRATION]
        backend.rollback_one(migration)
        began = time.perf_counter()
        backend.apply_one(migration)
        return time.perf_counter() - began
    finally:
        backend.connection.close()


async def run(url: str, scale: Scale = Scale()) -> Figure:
    pool = await create_pool(url, max_size=2)
    try:
        service = Service(pool, REGISTRY)
        deadline = datetime.now(UTC) + timedelta(days=30)
        await service.leaderboards.create("history", ghlib.tiny_task(), deadline, list(GPUS))
        receipt = await service.submissions.submit(
            "history",
            Submitter("alice", "Alice"),
            "s.py",
            b"def custom_kernel(data):\n    return data\n",
            gpus=[GPUS[0]],
            mode=Mode.TEST,
        )
        log(f"inserting {scale.jobs:,} ended jobs and their runs")
        began = time.perf_counter()
        await pool.execute(INSERT_JOBS, receipt.submission_id, list(GPUS), scale.jobs)
        await pool.execute(INSERT_RUNS)
        await pool.execute("ANALYZE")
        load_s = time.perf_counter() - began
        backfill_s = await asyncio.to_thread(count_again, url)
        await pool.expire_connections()  # statements prepared on the tables before
        figures = await service.monitoring.figures()
        ended = sum(e.count for e in figures.ended)
        if ended != await pool.fetchval(
            "SELECT count(*) FROM jobs WHERE state IN ('finished', 'failed')"
        ):
            raise RuntimeError(f"the totals count {ended} ended jobs, not all of them")
        log(f"timing {scale.calls} reads of the figures")
        for _ in range(scale.warm_up):
            await service.monitoring.figures()
        times = []
        for _ in range(scale.calls):
            began = time.perf_counter()
            await service.monitoring.figures()
            times.append((time.perf_counter() - began) * 1000)
        recounts = []
        for _ in range(scale.recounts):
            began = time.perf_counter()
            await pool.fetch(RECOUNT[0])
            await pool.fetch(RECOUNT[1], sorted(-bound for bound in RUN_SECONDS_BUCKETS))
            recounts.append((time.perf_counter() - began) * 1000)
    finally:
        await pool.close()
    return Figure(
        "metrics_scrape_ms",
        percentile(times, 95),
        "ms",
        TARGET_MS,
        details={
            "ended_jobs": ended,
            "calls": len(times),
            "p50_ms": round(median(times), 3),
            "max_ms": round(max(times), 3),
            "recount_ms": round(statistics.median(recounts), 1),
            "load_s": round(load_s, 1),
            "backfill_s": round(backfill_s, 2),
        },
    )


def main() -> int:
    try:
        with scratch_database("metrics") as url:
            figures = [asyncio.run(run(url))]
    except Exception as exc:
        figures = [Figure("metrics_scrape_ms", None, "ms", TARGET_MS, error=repr(exc))]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
