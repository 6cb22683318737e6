"""github_overhead_s_p50: what the platform adds to a GitHub run, submit to stored result.

The fake GitHub API (tests/support/fake_github) answers on loopback; its runner hands back a canned
result at once, so the runner's own time is zero and everything measured is ours: the service
storing the submission and enqueueing, the scheduler waking on NOTIFY and claiming, the
dispatch (a runs list to check the key, then the dispatch itself), polling at the launcher's
1 s interval until the run completes, the artifact lookup and download, and the result
transaction. The clock stops when the scheduler publishes the job's `finished` event, which
it does right after the run row is committed (checked afterwards).

Submissions go one at a time, 1.2 s apart: the launcher spaces dispatches by its write
interval (1 s, GitHub's advice for content-creating requests), and a submission that had to
wait for the previous one's spacing would measure the spacing, not the overhead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from datetime import UTC, datetime, timedelta

import asyncpg
import ghlib
from benchlib import Figure, log, median, percentile, report, rounded, scratch_database

from cluster_manager.core.models import Mode
from cluster_manager.launchers.github import GitHubLauncher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.database import create_pool
from tests.support.fake_github import FakeGitHub

SUBMISSIONS = 12
GAP_S = 1.2
TARGET_S = 1.0
RUNNER_TIME_S = 0.0  # the canned runner takes no time


class FinishedEvents:
    """Futures resolved by the scheduler's `finished`/`failed` events, by job id."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[str]] = {}

    def expect(self, job_id: int) -> asyncio.Future[str]:
        return self.waiting.setdefault(job_id, asyncio.get_running_loop().create_future())

    def on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        event = json.loads(payload)
        if event["state"] in ("finished", "failed"):
            future = self.expect(event["job_id"])
            if not future.done():
                future.set_result(event["state"])


async def one_submission(service: Service, events: FinishedEvents, user: str) -> float:
    """Seconds from `Service.submissions.submit` to the stored result of its one job."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    code = ghlib.CODE.encode()
    receipt = await service.submissions.submit(
        "bench", Submitter(user, user), "s.py", code, mode=Mode.TEST
    )
    job_id = receipt.jobs[0].id
    state = await asyncio.wait_for(events.expect(job_id), 60)
    elapsed = loop.time() - began
    stored = await service.pool.fetchval("SELECT verdict FROM runs WHERE job_id = $1", job_id)
    if state != "finished" or stored != "passed":
        raise RuntimeError(f"job {job_id} ended {state} with run {stored!r}")
    return elapsed


async def submissions(service: Service, events: FinishedEvents) -> list[float]:
    times = []
    for i in range(SUBMISSIONS):
        await asyncio.sleep(GAP_S)
        elapsed = await one_submission(service, events, f"user{i}")
        times.append(elapsed - RUNNER_TIME_S)
        log(f"submission {i + 1}/{SUBMISSIONS}: {elapsed:.3f} s")
    return times


async def serve_and_measure(pool: asyncpg.Pool, github: FakeGitHub) -> list[float]:
    """Runs a scheduler with the GitHub launcher while the submissions are timed."""
    launcher = GitHubLauncher(
        github.full_name,
        ["t1", "t2"],
        base_url=github.base_url,
        poll_interval=ghlib.POLL_INTERVAL_S,
        payload_key=github.payload_key,
    )
    service = Service(pool, ghlib.REGISTRY)
    deadline = datetime.now(UTC) + timedelta(days=1)
    await service.leaderboards.create("bench", ghlib.tiny_task(), deadline, [ghlib.GPU.name])
    scheduler = Scheduler(pool, ghlib.REGISTRY, {"github": launcher}, config=SchedulerConfig())
    stop = asyncio.Event()
    serving = asyncio.create_task(scheduler.run(stop))
    events = FinishedEvents()
    listener = await pool.acquire()
    await listener.add_listener(job_store.EVENTS_CHANNEL, events.on_notify)
    try:
        return await submissions(service, events)
    finally:
        await listener.remove_listener(job_store.EVENTS_CHANNEL, events.on_notify)
        await pool.release(listener)
        stop.set()
        with contextlib.suppress(Exception):
            await serving
        await launcher.close()


async def run(url: str) -> Figure:
    pool = await create_pool(url, max_size=10)
    try:
        with FakeGitHub(canned=ghlib.canned_result()) as github:
            times = await serve_and_measure(pool, github)
            counts = {f"{m} {r}": n for (m, r), n in sorted(github.counts.items())}
    finally:
        await pool.close()
    return Figure(
        "github_overhead_s_p50",
        median(times),
        "s",
        TARGET_S,
        details={
            "submissions": SUBMISSIONS,
            "poll_interval_s": ghlib.POLL_INTERVAL_S,
            "p90_s": round(percentile(times, 90), 4),
            "max_s": round(max(times), 4),
            "overhead_s": rounded(times),
            "github_requests": counts,
        },
    )


def main() -> int:
    try:
        with scratch_database("github") as url:
            figure = asyncio.run(run(url))
    except Exception as exc:
        figure = Figure("github_overhead_s_p50", None, "s", TARGET_S, error=repr(exc))
    return report([figure])


if __name__ == "__main__":
    sys.exit(main())
