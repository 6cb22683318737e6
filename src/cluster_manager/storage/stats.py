"""Counts for organisers: submissions, users, runs per GPU, queue waits, failures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from cluster_manager.storage.database import Executor


@dataclass(frozen=True)
class GpuStats:
    runs: int
    queued: int  # now
    running: int  # now
    wait_p50_s: float | None  # from enqueued to claimed, over the period
    wait_p95_s: float | None


@dataclass(frozen=True)
class Stats:
    since: datetime | None  # None: all time
    submissions: int
    submitters: int  # users who submitted in the period
    users: int  # every user known
    runs: int
    failed_jobs: int  # jobs given up on (no run)
    verdicts: dict[str, int] = field(default_factory=dict)  # runs by verdict
    gpus: dict[str, GpuStats] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """What the admin API answers and `admin stats --json` prints."""
        found = asdict(self)
        found["since"] = None if self.since is None else self.since.isoformat()
        return found


async def stats(db: Executor, since: datetime | None) -> Stats:
    totals = await db.fetchrow(
        """
        SELECT (SELECT count(*) FROM submissions WHERE $1::timestamptz IS NULL
                   OR submitted_at >= $1) AS submissions,
               (SELECT count(DISTINCT user_id) FROM submissions WHERE $1::timestamptz IS NULL
                   OR submitted_at >= $1) AS submitters,
               (SELECT count(*) FROM users) AS users,
               (SELECT count(*) FROM runs WHERE $1::timestamptz IS NULL
                   OR created_at >= $1) AS runs,
               (SELECT count(*) FROM jobs WHERE state = 'failed'
                   AND ($1::timestamptz IS NULL OR created_at >= $1)) AS failed_jobs
        """,
        since,
    )
    assert totals is not None
    verdicts = await db.fetch(
        "SELECT verdict, count(*) AS n FROM runs WHERE $1::timestamptz IS NULL OR created_at >= $1"
        " GROUP BY verdict ORDER BY n DESC, verdict",
        since,
    )
    gpus = await db.fetch(
        """
        WITH j AS (
            SELECT gpu, state, extract(epoch FROM claimed_at - created_at) AS wait,
                   ($1::timestamptz IS NULL OR created_at >= $1) AS recent
            FROM jobs
        )
        SELECT gpu,
               count(*) FILTER (WHERE recent AND state IN ('finished', 'failed')) AS runs,
               count(*) FILTER (WHERE state = 'queued') AS queued,
               count(*) FILTER (WHERE state IN ('claimed', 'dispatched')) AS running,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY wait)
                   FILTER (WHERE recent AND wait IS NOT NULL) AS wait_p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY wait)
                   FILTER (WHERE recent AND wait IS NOT NULL) AS wait_p95
        FROM j GROUP BY gpu ORDER BY gpu
        """,
        since,
    )
    return Stats(
        since=since,
        submissions=totals["submissions"],
        submitters=totals["submitters"],
        users=totals["users"],
        runs=totals["runs"],
        failed_jobs=totals["failed_jobs"],
        verdicts={r["verdict"]: r["n"] for r in verdicts},
        gpus={
            r["gpu"]: GpuStats(
                r["runs"],
                r["queued"],
                r["running"],
                None if r["wait_p50"] is None else float(r["wait_p50"]),
                None if r["wait_p95"] is None else float(r["wait_p95"]),
            )
            for r in gpus
        },
    )
