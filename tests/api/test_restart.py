"""A server that dies with submissions in flight loses none of them: the next one (its
scheduler adopting the jobs once their leases lapse) finishes them, and clients polling it
get the results."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from cluster_manager.api.app import create_api
from cluster_manager.app import App
from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling
from cluster_manager.settings import Settings
from tests.api.conftest import BOARD, FAST, popcorn_headers, source, token_of
from tests.support.replay import ReplayLauncher


def client_of(app: App, settings: Settings) -> httpx.AsyncClient:
    api = create_api(app.service, settings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://api.test")


@pytest.mark.reliability(
    "Faults",
    "the API server dying (its scheduler cancelled mid-run, no clean-up) with a ranked "
    "submission in flight, then a new server started",
    "the new server's scheduler adopts the jobs when their leases lapse; the client polling "
    "the new server sees the submission succeed, ranked",
)
async def test_a_restarted_server_finishes_what_the_dead_one_left(
    app: App, settings: Settings, replay_launcher: ReplayLauncher, record_property
):
    token = await token_of(app, "alice")
    headers = popcorn_headers(token)
    replay_launcher.hold()  # the runs are still in flight when the first server dies
    first_stop = asyncio.Event()
    first = asyncio.create_task(keep_scheduling(app.scheduler, first_stop, FAST))
    async with client_of(app, settings) as http:
        accepted = await http.post(
            f"/submission/{BOARD}/CPU/leaderboard",
            headers=headers,
            files={"file": ("submission.py", source())},
        )
        submission_id = accepted.json()["details"]["id"]
        for _ in range(300):
            if await app.pool.fetchval("SELECT count(*) FROM jobs WHERE state = 'dispatched'"):
                break
            await asyncio.sleep(0.02)
    first.cancel()  # the process is gone: nothing releases its leases
    with pytest.raises(asyncio.CancelledError):
        await first
    states = [r["state"] for r in await app.pool.fetch("SELECT state FROM jobs ORDER BY id")]
    replay_launcher.let_go()

    second_stop = asyncio.Event()
    second = asyncio.create_task(keep_scheduling(app.scheduler, second_stop, FAST))
    try:
        async with client_of(app, settings) as http:
            for _ in range(900):
                details = (
                    await http.get(f"/user/submissions/{submission_id}", headers=headers)
                ).json()
                if details["done"]:
                    break
                await asyncio.sleep(0.1)
            ranking = (await http.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]
    finally:
        await stop_scheduling(second, second_stop)
    assert details["job"]["status"] == "succeeded", details["job"]
    assert [e["submission_id"] for e in ranking] == [submission_id]
    record_property(
        "observed", f"job states at the crash: {states}; then {details['job']['status']}, ranked #1"
    )
