"""The figures `/metrics` exposes, read at scrape time from the database that every process
(the server, each worker, the bot) shares: per GPU type the queue and who serves it, and every
job that ended, by outcome, with how long its run took.

The job figures are counters of every job ever ended, so reading them must not cost more as
the history grows. Counting `jobs` at each scrape did (80 ms at 100,000 ended jobs, a second
at a million), and no index makes a full count sub-linear: it still visits one entry per ended
job, however narrow the index. So the totals are kept as they happen: the transaction that
ends a job adds it to its row of `ended_job_totals` (per GPU type, launcher and outcome) and,
when it ran, of `run_seconds_totals` (per GPU type and bucket), in storage.ended_totals;
migration 0023 made the tables and counted the jobs that had ended before. A scrape reads those
few rows: about 1 ms at 200,000 ended jobs as at a million (benchmarks/metrics_scrape.py), and
every process reads the same numbers. The storage functions that end a job write the totals,
not a trigger: a trigger on `jobs` would fire before the run (whose verdict is the outcome) is
stored, and the SQL that decides an outcome would hide in the schema;
tests/storage/test_ended_totals.py holds the totals to a full recount after every kind of
ending. A job deleted later stays counted, as a counter must. The queue's counts read the
partial indexes of open jobs."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_manager.storage.database import Executor
from cluster_manager.storage.ended_totals import DISPATCH_ERROR as DISPATCH_ERROR
from cluster_manager.storage.ended_totals import LOST as LOST
from cluster_manager.storage.ended_totals import NOT_DISPATCHED as NOT_DISPATCHED
from cluster_manager.storage.ended_totals import RUN_SECONDS_BUCKETS as RUN_SECONDS_BUCKETS
from cluster_manager.storage.served import SERVED_WINDOW_S


@dataclass(frozen=True)
class GpuLoad:
    gpu: str
    queued: int  # jobs waiting for a claim
    oldest_wait_s: float  # how long the oldest of them has waited since it was submitted; 0: none
    in_flight: int  # claimed or dispatched
    schedulers: int  # live schedulers that serve the type (storage.served)
    open_leaderboards: int  # leaderboards before their deadline that run on it


@dataclass(frozen=True)
class EndedJobs:
    gpu: str
    launcher: str  # "" when no launcher was recorded (the job never reached one)
    outcome: str  # the run's verdict, or how a failed job ended (DISPATCH_ERROR, LOST, ...)
    count: int


@dataclass(frozen=True)
class RunSeconds:
    """Finished jobs' run times (dispatch to the recorded result) on one GPU type, as a
    histogram: `buckets[i]` counts those of at most `RUN_SECONDS_BUCKETS[i]` seconds."""

    gpu: str
    count: int
    total_s: float
    buckets: tuple[int, ...]


@dataclass(frozen=True)
class Figures:
    gpus: tuple[GpuLoad, ...]
    ended: tuple[EndedJobs, ...]
    run_seconds: tuple[RunSeconds, ...]
    schedulers: int  # live whole-queue schedulers, whatever they serve


async def figures(db: Executor, window_s: float = SERVED_WINDOW_S) -> Figures:
    return Figures(
        gpus=tuple(await gpu_loads(db, window_s)),
        ended=tuple(await ended_jobs(db)),
        run_seconds=tuple(await run_seconds(db)),
        schedulers=await live_schedulers(db, window_s),
    )


async def gpu_loads(db: Executor, window_s: float = SERVED_WINDOW_S) -> list[GpuLoad]:
    """Every GPU type a leaderboard runs on, a job waits for or a scheduler serves. The
    queued and in-flight counts read the partial indexes `jobs_queued` and `jobs_active`,
    and the GPU types of open jobs are taken from those counts: a condition on `state` that
    neither index's covers would read every job."""
    rows = await db.fetch(
        """
        WITH queued AS (
            SELECT gpu, count(*) AS n,
                   date_part('epoch', now() - min(created_at)) AS oldest_s
            FROM jobs WHERE state = 'queued' GROUP BY gpu
        ),
        in_flight AS (
            SELECT gpu, count(*) AS n FROM jobs
            WHERE state IN ('claimed', 'dispatched') GROUP BY gpu
        ),
        gpus AS (
            SELECT gpu FROM leaderboard_gpus
            UNION SELECT gpu FROM queued
            UNION SELECT gpu FROM in_flight
            UNION SELECT gpu FROM served_gpus
                WHERE seen_at > now() - make_interval(secs => $1)
        ),
        served AS (
            SELECT gpu, count(DISTINCT owner) AS n FROM served_gpus
            WHERE seen_at > now() - make_interval(secs => $1) GROUP BY gpu
        ),
        open_boards AS (
            SELECT lg.gpu, count(*) AS n
            FROM leaderboard_gpus lg JOIN leaderboards l ON l.id = lg.leaderboard_id
            WHERE l.deadline > now() GROUP BY lg.gpu
        )
        SELECT g.gpu, coalesce(q.n, 0) AS queued, greatest(coalesce(q.oldest_s, 0), 0) AS oldest_s,
               coalesce(f.n, 0) AS in_flight, coalesce(s.n, 0) AS schedulers,
               coalesce(b.n, 0) AS open_leaderboards
        FROM gpus g
        LEFT JOIN queued q USING (gpu)
        LEFT JOIN in_flight f USING (gpu)
        LEFT JOIN served s USING (gpu)
        LEFT JOIN open_boards b USING (gpu)
        ORDER BY g.gpu
        """,
        window_s,
    )
    return [
        GpuLoad(
            r["gpu"],
            r["queued"],
            r["oldest_s"],
            r["in_flight"],
            r["schedulers"],
            r["open_leaderboards"],
        )
        for r in rows
    ]


async def ended_jobs(db: Executor) -> list[EndedJobs]:
    """Every finished or failed job, by GPU type, launcher and outcome: a finished job's is its
    run's verdict; a failed job's says where it stopped (see DISPATCH_ERROR)."""
    rows = await db.fetch(
        "SELECT gpu, launcher, outcome, jobs FROM ended_job_totals ORDER BY gpu, launcher, outcome"
    )
    return [EndedJobs(r["gpu"], r["launcher"], r["outcome"], r["jobs"]) for r in rows]


async def run_seconds(db: Executor) -> list[RunSeconds]:
    """Per GPU type, finished jobs' run times counted into cumulative buckets, from the runs
    counted by the bucket each fell in."""
    rows = await db.fetch("SELECT gpu, le, runs, total_us FROM run_seconds_totals ORDER BY gpu")
    found: dict[str, list[tuple[float, int, int]]] = {}
    for r in rows:
        found.setdefault(r["gpu"], []).append((r["le"], r["runs"], r["total_us"]))
    return [
        RunSeconds(
            gpu,
            count=sum(n for _, n, _ in groups),
            total_s=sum(us for _, _, us in groups) / 1e6,
            buckets=tuple(
                sum(n for le, n, _ in groups if le <= bound) for bound in RUN_SECONDS_BUCKETS
            ),
        )
        for gpu, groups in found.items()
    ]


async def live_schedulers(db: Executor, window_s: float = SERVED_WINDOW_S) -> int:
    """Whole-queue schedulers that have said within the window which types they serve."""
    count: int = await db.fetchval(
        "SELECT count(DISTINCT owner) FROM served_gpus"
        " WHERE seen_at > now() - make_interval(secs => $1)",
        window_s,
    )
    return count
