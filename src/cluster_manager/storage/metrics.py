"""The figures `/metrics` exposes, read at scrape time from the database that every process
(the server, each worker, the bot) shares: per GPU type the queue and who serves it, and every
job that ended, by outcome, with how long its run took.

The job totals count every job ever ended (a Prometheus counter must not go down as jobs age
out of a window), so two queries read every ended job, each in one pass with no sort: `jobs`
alone, and `jobs` with its runs' verdicts. The queue's counts read the partial indexes of open
jobs. At 100,000 ended jobs a whole read takes under 0.1 s."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_manager.storage.database import Executor
from cluster_manager.storage.served import SERVED_WINDOW_S

# Upper bounds (seconds) of the run time histogram's buckets: a quick test run on a local GPU
# to a ranked run queued behind a GitHub runner's start.
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
    queued and in-flight counts read the partial indexes `jobs_queued` and `jobs_active`."""
    rows = await db.fetch(
        """
        WITH gpus AS (
            SELECT gpu FROM leaderboard_gpus
            UNION SELECT gpu FROM jobs WHERE state IN ('queued', 'claimed', 'dispatched')
            UNION SELECT gpu FROM served_gpus
                WHERE seen_at > now() - make_interval(secs => $1)
        ),
        queued AS (
            SELECT gpu, count(*) AS n,
                   date_part('epoch', now() - min(created_at)) AS oldest_s
            FROM jobs WHERE state = 'queued' GROUP BY gpu
        ),
        in_flight AS (
            SELECT gpu, count(*) AS n FROM jobs
            WHERE state IN ('claimed', 'dispatched') GROUP BY gpu
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
        """
        SELECT j.gpu, coalesce(j.launcher, '') AS launcher,
               CASE WHEN j.state = 'finished' THEN coalesce(r.verdict, 'unrecorded')
                    WHEN j.dispatched_at IS NOT NULL THEN $1
                    WHEN j.launcher IS NOT NULL THEN $2
                    ELSE $3 END AS outcome,
               count(*) AS n
        FROM jobs j LEFT JOIN runs r ON r.job_id = j.id
        WHERE j.state IN ('finished', 'failed')
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        """,
        LOST,
        DISPATCH_ERROR,
        NOT_DISPATCHED,
    )
    return [EndedJobs(r["gpu"], r["launcher"], r["outcome"], r["n"]) for r in rows]


async def run_seconds(db: Executor) -> list[RunSeconds]:
    """Per GPU type, finished jobs' run times counted into cumulative buckets, in one grouped
    pass: each run is grouped by how many bounds are at least its seconds (`width_bucket` of
    its negated seconds over the negated bounds), and each bucket's count follows from that."""
    rows = await db.fetch(
        """
        SELECT gpu, width_bucket(-seconds, $1::float8[]) AS bounds_above, count(*) AS n,
               sum(seconds) AS total_s
        FROM (
            -- date_part, not extract: a float, not a numeric, twice as fast over many rows
            SELECT gpu, greatest(date_part('epoch', finished_at - dispatched_at), 0) AS seconds
            FROM jobs
            WHERE state = 'finished' AND dispatched_at IS NOT NULL AND finished_at IS NOT NULL
        ) finished
        GROUP BY gpu, bounds_above ORDER BY gpu
        """,
        sorted(-bound for bound in RUN_SECONDS_BUCKETS),
    )
    found: dict[str, list[tuple[int, int, float]]] = {}
    for r in rows:
        found.setdefault(r["gpu"], []).append((r["bounds_above"], r["n"], r["total_s"]))
    last = len(RUN_SECONDS_BUCKETS)
    return [
        RunSeconds(
            gpu,
            count=sum(n for _, n, _ in groups),
            total_s=sum(total for _, _, total in groups),
            # A run fits under the i-th bound when at least `last - i` bounds are above it.
            buckets=tuple(
                sum(n for above, n, _ in groups if above >= last - i) for i in range(last)
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
