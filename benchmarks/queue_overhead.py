"""queue_overhead_ms_per_job: what the durable queue costs per job on the real Postgres.

500 test-mode submissions (one job each) are stored with `Service.submissions.submit`, then one
scheduler drains them with `run_until_idle` on a launcher whose runs take exactly 10 ms (an
in-memory launcher: `follow` sleeps 10 ms after `submit`), at most 8 at a time.

    overhead per job = (drain time - 500 x 10 ms / 8) / 500

The drain time runs from `run_until_idle` being called to the last result stored, both read on
the database's clock, so it holds everything each job costs: claiming, building the request,
dispatch bookkeeping, lease records, the result transaction, submission status and events. It
leaves out `run_until_idle` noticing afterwards that the queue is empty (it looks every half
poll interval): that is paid once per drain, not per job, and is reported as
`until_idle_returned_s`. Storing the submissions is timed apart (`submit_ms_per_job`): it is
the front end's cost, paid before a job is queued.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg
import ghlib
from benchlib import Figure, log, report, scratch_database

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, ProgressCallback, RunHandle, RunState
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from cluster_manager.storage.database import create_pool

JOBS = 500
WORK_S = 0.010
CONCURRENCY = 8
TARGET_MS = 5.0
REGISTRY = GpuRegistry({"CPU": GpuType("CPU", "timed", max_concurrent=CONCURRENCY)})


@dataclass
class TimedLauncher(Launcher):
    """Every run takes `work_s` from its dispatch, then passes."""

    name: str = "timed"
    work_s: float = WORK_S
    started: dict[str, float] = field(default_factory=dict)
    running: int = 0
    peak: int = 0

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        self.started[key] = time.monotonic()
        return RunHandle(self.name, key)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        return {h.external_id: RunState.FINISHED for h in handles}

    async def result(self, handle: RunHandle) -> RunResult:
        return RunResult(True, Verdict.PASSED, Mode.TEST, "ok")

    async def cancel(self, handle: RunHandle) -> None:
        pass

    async def follow(
        self, handle: RunHandle, *, timeout: float, on_progress: ProgressCallback | None = None
    ) -> RunResult | None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            left = self.started[handle.external_id] + self.work_s - time.monotonic()
            await asyncio.sleep(max(0.0, left))
        finally:
            self.running -= 1
        return await self.result(handle)


async def submit_all(service: Service) -> float:
    """Stores the submissions; returns the seconds it took."""
    began = time.perf_counter()
    code = ghlib.CODE.encode()
    for i in range(JOBS):
        user = f"user{i % 50}"
        await service.submissions.submit(
            "bench", Submitter(user, user), "s.py", code, mode=Mode.TEST
        )
    return time.perf_counter() - began


async def drain(pool: asyncpg.Pool, launcher: TimedLauncher) -> dict[str, float]:
    """Serves the queue until it is empty; seconds to the last result, and to the return."""
    scheduler = Scheduler(pool, REGISTRY, {"timed": launcher}, config=SchedulerConfig())
    started_at = await pool.fetchval("SELECT clock_timestamp()")
    began = time.perf_counter()
    await scheduler.run_until_idle()
    returned_s = time.perf_counter() - began
    stored = await pool.fetchval("SELECT count(*) FROM runs WHERE passed")
    if stored != JOBS:
        raise RuntimeError(f"{stored} of {JOBS} runs were stored")
    last_at = await pool.fetchval("SELECT max(created_at) FROM runs")
    return {"drain_s": (last_at - started_at).total_seconds(), "returned_s": returned_s}


async def run(url: str) -> Figure:
    pool = await create_pool(url, max_size=20)
    launcher = TimedLauncher()
    try:
        service = Service(pool, REGISTRY)
        deadline = datetime.now(UTC) + timedelta(days=1)
        await service.leaderboards.create(
            "bench", ghlib.tiny_task(), deadline, ["CPU"], rate_limit_per_hour=JOBS
        )
        log(f"storing {JOBS} submissions")
        submit_s = await submit_all(service)
        log(f"draining {JOBS} jobs of {WORK_S * 1000:g} ms, {CONCURRENCY} at a time")
        times = await drain(pool, launcher)
    finally:
        await pool.close()
    ideal_s = JOBS * WORK_S / CONCURRENCY
    return Figure(
        "queue_overhead_ms_per_job",
        (times["drain_s"] - ideal_s) / JOBS * 1000,
        "ms/job",
        TARGET_MS,
        details={
            "jobs": JOBS,
            "work_ms": WORK_S * 1000,
            "concurrency": CONCURRENCY,
            "peak_concurrency": launcher.peak,
            "drain_s": round(times["drain_s"], 3),
            "ideal_s": ideal_s,
            "until_idle_returned_s": round(times["returned_s"], 3),
            "submit_ms_per_job": round(submit_s / JOBS * 1000, 3),
            "scheduler_poll_s": SchedulerConfig().poll_s,
        },
    )


def main() -> int:
    try:
        with scratch_database("queue") as url:
            figure = asyncio.run(run(url))
    except Exception as exc:
        figure = Figure("queue_overhead_ms_per_job", None, "ms/job", TARGET_MS, error=repr(exc))
    return report([figure])


if __name__ == "__main__":
    sys.exit(main())
