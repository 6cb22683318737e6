"""api_rss_mb_200_streams and api_p95_ms_200_streams: one `cluster-manager serve` process
with 200 clients following submissions over server-sent events at once.

200 users have each a queued submission (no scheduler runs, so every stream stays open) and an
API token of their own; 200 clients in this process, one per user, open `GET /submissions/ID/
events` together, each with its user's token, and read the first event of each: many users
within the per-token cap on open streams (`api/streams.py`), as a busy server meets them. Once
all are open and the server has settled: its resident memory (VmRSS, median of 10 samples)
and the p95 of 100 `GET /leaderboards/NAME` made meanwhile (does it stay responsive?). Both
are informative. The server's idle memory is in the details.
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
REGISTRY = GpuRegistry({"CPU": GpuType("CPU", "local", max_concurrent=2)})


async def queue_submissions(url: str, streams: int = STREAMS) -> list[tuple[int, str]]:
    """(submission id, its user's API token) of one queued submission per user."""
    pool = await create_pool(url, max_size=4)
    try:
        service = Service(pool, REGISTRY)
        task = load_task(EXAMPLES_DIR / "identity_py")
        deadline = datetime.now(UTC) + timedelta(days=30)
        await service.leaderboards.create(BOARD, task, deadline, ["CPU"])
        code = (EXAMPLES_DIR / "identity_py" / "submission.py").read_bytes()
        queued = []
        for i in range(streams):
            user = Submitter(f"streamer{i}", f"streamer{i}")
            receipt = await service.submissions.submit(
                BOARD, user, "submission.py", code, mode=Mode.TEST
            )
            queued.append((receipt.submission_id, await service.accounts.issue_token(user)))
        return queued
    finally:
        await pool.close()


Opened = asyncio.Queue[int | Exception]


async def follow(client: httpx.AsyncClient, submission_id: int, token: str, opened: Opened) -> None:
    """Opens the submission's stream and holds it open until cancelled; a refusal or an early
    end is put on `opened` too, so the measurement stops at once instead of waiting for it."""
    headers = {"Authorization": f"Bearer {token}"}
    path = f"/submissions/{submission_id}/events"
    try:
        async with aconnect_sse(client, "GET", path, headers=headers) as source:
            source.response.raise_for_status()
            async for _event in source.aiter_sse():
                opened.put_nowait(submission_id)
                await asyncio.Event().wait()
        opened.put_nowait(RuntimeError(f"the stream of submission {submission_id} ended"))
    except (httpx.HTTPError, OSError) as exc:
        opened.put_nowait(exc)


async def measure(
    url: str, queued: list[tuple[int, str]], calls: int = CALLS, settle_s: float = SETTLE_S
) -> list[Figure]:
    streams = len(queued)
    with apilib.served(url) as (base, server):
        limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=20)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            await apilib.time_gets(client, f"/leaderboards/{BOARD}", 1, WARM_UP)
            idle_mb = median([apilib.rss_mb(server.pid) for _ in range(SAMPLES)])
            opened: Opened = asyncio.Queue()
            followers = [asyncio.create_task(follow(client, i, t, opened)) for i, t in queued]
            began = asyncio.get_running_loop().time()
            for _ in queued:
                if isinstance(got := await asyncio.wait_for(opened.get(), 120), Exception):
                    raise RuntimeError(f"a stream was not held open: {got!r}")
            open_s = asyncio.get_running_loop().time() - began
            log(f"{streams} streams open in {open_s:.1f} s")
            await asyncio.sleep(settle_s)
            samples = []
            for _ in range(SAMPLES):
                samples.append(apilib.rss_mb(server.pid))
                await asyncio.sleep(0.3)
            times = await apilib.time_gets(client, f"/leaderboards/{BOARD}", calls, WARM_UP)
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
            if not opened.empty():
                raise RuntimeError(f"a stream ended early: {opened.get_nowait()!r}")
    details = {"streams": streams, "idle_rss_mb": round(idle_mb, 1), "open_s": round(open_s, 2)}
    return [
        Figure("api_rss_mb_200_streams", median(samples), "MB", None, details=details),
        Figure(
            "api_p95_ms_200_streams",
            percentile(times, 95),
            "ms",
            None,
            details={"calls": calls, "p50_ms": round(median(times), 3)},
        ),
    ]


def main() -> int:
    try:
        with scratch_database("api_streams") as url:
            log(f"queueing {STREAMS} submissions")
            queued = asyncio.run(queue_submissions(url))
            figures = asyncio.run(measure(url, queued))
    except Exception as exc:
        figures = [
            Figure("api_rss_mb_200_streams", None, "MB", None, error=repr(exc)),
            Figure("api_p95_ms_200_streams", None, "ms", None, error=repr(exc)),
        ]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
