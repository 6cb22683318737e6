"""github_requests_per_min_at_{1,10,100}: what following runs costs in API requests.

For each load a fresh fake GitHub holds every run in its queue (a queue delay of an hour), the
launcher (1 s poll interval) dispatches the runs, and one `follow` per run polls them as the
scheduler does. After a settling period the requests spent on following (runs lists and single
run gets; not dispatches, artifacts or downloads) are counted over a fixed window. Following
must cost the same however many runs are in flight: the targets at 10 and 100 are the figure
at 1 plus 10 % for timing jitter.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

import ghlib
from benchlib import Figure, log, report

from cluster_manager.launchers.base import RunHandle
from cluster_manager.launchers.github import GitHubLauncher
from tests.support.fake_github import FakeGitHub

LOADS = (1, 10, 100)
SETTLE_S = 3.0
WINDOW_S = 20.0
TOLERANCE = 1.10
FOLLOW_ROUTES = ("runs", "run")
HOLD_S = 3600.0


async def dispatch(launcher: GitHubLauncher, count: int) -> list[RunHandle]:
    request = ghlib.request(ghlib.tiny_task())
    return [
        await launcher.submit(request, f"bench-{i}-attempt-1", gpu=ghlib.GPU) for i in range(count)
    ]


def count_window(github: FakeGitHub, began: float, ended: float) -> dict[str, int]:
    """Following requests in [began, ended), by route, and how many were 304s."""
    found = {route: github.requests(route, since=began) for route in FOLLOW_ROUTES}
    inside = {route: [r for r in rs if r.at < ended] for route, rs in found.items()}
    counts = {route: len(rs) for route, rs in inside.items()}
    counts["not_modified"] = sum(1 for rs in inside.values() for r in rs if r.status == 304)
    return counts


async def follow_window(launcher: GitHubLauncher, github: FakeGitHub, count: int) -> dict:
    """Dispatches `count` runs, follows them all, and counts a window of their polling."""
    handles = await dispatch(launcher, count)
    followers = [asyncio.create_task(launcher.follow(h, timeout=HOLD_S)) for h in handles]
    try:
        await asyncio.sleep(SETTLE_S)
        began = time.monotonic()
        await asyncio.sleep(WINDOW_S)
        ended = time.monotonic()
        if any(f.done() for f in followers):
            raise RuntimeError("a followed run ended during the window")
    finally:
        for follower in followers:
            follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*followers, return_exceptions=True)
    counts = count_window(github, began, ended)
    window = ended - began
    return {
        "per_min": (counts["runs"] + counts["run"]) * 60 / window,
        "window_s": round(window, 3),
        "runs_lists": counts["runs"],
        "run_gets": counts["run"],
        "not_modified": counts["not_modified"],
    }


async def requests_per_minute(count: int) -> dict[str, float]:
    with FakeGitHub(queue_delay=HOLD_S) as github:
        # Dispatches are not what is measured: no spacing between them.
        launcher = GitHubLauncher(
            github.full_name,
            ["t1", "t2"],
            base_url=github.base_url,
            poll_interval=ghlib.POLL_INTERVAL_S,
            write_interval=0.0,
            payload_key=github.payload_key,
        )
        try:
            return await follow_window(launcher, github, count)
        finally:
            await launcher.close()


async def run() -> list[Figure]:
    measured = {}
    for count in LOADS:
        log(f"{count} run(s) in flight: settling {SETTLE_S:g} s, counting {WINDOW_S:g} s")
        measured[count] = await requests_per_minute(count)
        log(f"{count}: {measured[count]}")
    base = measured[LOADS[0]]["per_min"]
    return [
        Figure(
            f"github_requests_per_min_at_{count}",
            measured[count]["per_min"],
            "req/min",
            None if count == LOADS[0] else base * TOLERANCE,
            details={k: v for k, v in measured[count].items() if k != "per_min"},
        )
        for count in LOADS
    ]


def main() -> int:
    try:
        figures = asyncio.run(run())
    except Exception as exc:
        figures = [
            Figure(f"github_requests_per_min_at_{n}", None, "req/min", None, error=repr(exc))
            for n in LOADS
        ]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
