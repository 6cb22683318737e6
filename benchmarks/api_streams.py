"""api_rss_mb_200_streams and api_p95_ms_200_streams: one `cluster-manager serve` process
with 200 clients following submissions over server-sent events at once.

200 users have each a queued submission (no scheduler runs, so every stream stays open); 200
clients in this process open `GET /submissions/{id}/events` together and read the first event
of each. Once all are open and the server has settled: its resident memory (VmRSS, median of
10 samples) and the p95 of 100 `GET /leaderboards/NAME` made meanwhile (does it stay
responsive?). Both are informative. The server's idle memory is in the details.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta

import apilib
import httpx
from benchlib import Figure, log, median, percentile, report, scratch_database
from httpx_sse import aconnect_sse

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR
from cluster_manager.service import Service, Submitter
from cluster_manager.storage.database import create_pool

STREAMS = 200
CALLS = 100
WARM_UP = 10
SAMPLES = 10
SETTLE_S = 3.0
BOARD = "streams"
ADMIN = "bench-admin-token"
REGISTRY = GpuRegistry({"CPU": GpuType("CPU", "local", max_concurrent=2)})


async def queue_submissions(url: str) -> list[int]:
    pool = await create_pool(url, max_size=4)
    try:
        service = Service(pool, REGISTRY)
        task = load_task(EXAMPLES_DIR / "identity_py")
        deadline = datetime.now(UTC) + timedelta(days=30)
        await service.create_leaderboard(BOARD, task, deadline, ["CPU"])
        code = (EXAMPLES_DIR / "identity_py" / "submission.py").read_bytes()
        ids = []
        for i in range(STREAMS):
            user = Submitter(f"streamer{i}", f"streamer{i}")
            receipt = await service.submit(BOARD, user, "submission.py", code, mode=Mode.TEST)
            ids.append(receipt.submission_id)
        return ids
    finally:
        await pool.close()


async def follow(client: httpx.AsyncClient, submission_id: int, opened: asyncio.Queue[int]) -> None:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    path = f"/submissions/{submission_id}/events"
    async with aconnect_sse(client, "GET", path, headers=headers) as source:
        async for _event in source.aiter_sse():
            opened.put_nowait(submission_id)
            await asyncio.Event().wait()  # hold the stream open until cancelled


async def measure(url: str, ids: list[int]) -> list[Figure]:
    with apilib.served(url, CLUSTER_MANAGER_ADMIN_TOKEN=ADMIN) as (base, server):
        limits = httpx.Limits(max_connections=STREAMS + 10, max_keepalive_connections=20)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            await apilib.time_gets(client, f"/leaderboards/{BOARD}", 1, WARM_UP)
            idle_mb = median([apilib.rss_mb(server.pid) for _ in range(SAMPLES)])
            opened: asyncio.Queue[int] = asyncio.Queue()
            followers = [asyncio.create_task(follow(client, i, opened)) for i in ids]
            began = asyncio.get_running_loop().time()
            for _ in ids:
                await asyncio.wait_for(opened.get(), 120)
            open_s = asyncio.get_running_loop().time() - began
            log(f"{STREAMS} streams open in {open_s:.1f} s")
            await asyncio.sleep(SETTLE_S)
            samples = []
            for _ in range(SAMPLES):
                samples.append(apilib.rss_mb(server.pid))
                await asyncio.sleep(0.3)
            times = await apilib.time_gets(client, f"/leaderboards/{BOARD}", CALLS, WARM_UP)
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
    details = {"streams": STREAMS, "idle_rss_mb": round(idle_mb, 1), "open_s": round(open_s, 2)}
    return [
        Figure("api_rss_mb_200_streams", median(samples), "MB", None, details=details),
        Figure(
            "api_p95_ms_200_streams",
            percentile(times, 95),
            "ms",
            None,
            details={"calls": CALLS, "p50_ms": round(median(times), 3)},
        ),
    ]


def main() -> int:
    try:
        with scratch_database("api_streams") as url:
            log(f"queueing {STREAMS} submissions")
            ids = asyncio.run(queue_submissions(url))
            figures = asyncio.run(measure(url, ids))
    except Exception as exc:
        figures = [
            Figure("api_rss_mb_200_streams", None, "MB", None, error=repr(exc)),
            Figure("api_p95_ms_200_streams", None, "ms", None, error=repr(exc)),
        ]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
