"""GET /queue: every GPU type's line for anyone, and whether a scheduler runs it; a user's own
jobs and places only for them. GET /health: the GPU types a scheduler runs."""

from __future__ import annotations

import asyncio

import httpx

from cluster_manager.app import App
from cluster_manager.rendering.ops import format_queue
from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling
from tests.api.conftest import BOARD, FAST, popcorn_headers, source, token_of


async def test_the_queue_shows_counts_to_all_and_places_to_the_owner(
    app: App, client: httpx.AsyncClient
):
    tokens = {user: await token_of(app, user) for user in ("alice", "bob")}
    for user in ("bob", "alice", "alice"):
        answer = await client.post(
            f"/submission/{BOARD}/CPU/test",
            headers=popcorn_headers(tokens[user]),
            files={"file": ("submission.py", source())},
        )
        assert answer.status_code == 202
    anonymous = (await client.get("/queue")).json()
    assert {g["gpu"]: (g["queued"], g["running"]) for g in anonymous["gpus"]} == {
        "CPU": (3, 0),
        "CPU2": (0, 0),
    }
    assert anonymous["mine"] == []
    mine = (await client.get("/queue", headers=popcorn_headers(tokens["alice"]))).json()["mine"]
    assert [(j["gpu"], j["state"], j["position"]) for j in mine] == [
        ("CPU", "queued", 2),
        ("CPU", "queued", 3),
    ]
    assert {j["leaderboard"] for j in mine} == {BOARD}
    bad = await client.get("/queue", headers=popcorn_headers("cm_not-a-token"))
    assert bad.status_code == 401  # credentials that name nobody are refused, not ignored


async def test_health_and_the_queue_say_which_gpu_types_a_scheduler_runs(
    app: App, client: httpx.AsyncClient
):
    assert (await client.get("/health")).json()["served_gpus"] == []
    before = (await client.get("/queue")).json()
    assert {g["gpu"]: g["served"] for g in before["gpus"]} == {"CPU": False, "CPU2": False}
    assert "No scheduler runs CPU, CPU2: jobs queued there fail" in format_queue(before)

    stop = asyncio.Event()
    scheduling = asyncio.create_task(keep_scheduling(app.scheduler, stop, FAST))
    try:
        for _ in range(100):
            if (await client.get("/health")).json()["served_gpus"]:
                break
            await asyncio.sleep(0.05)
        assert (await client.get("/health")).json()["served_gpus"] == ["CPU", "CPU2"]
        during = (await client.get("/queue")).json()
        assert {g["gpu"]: g["served"] for g in during["gpus"]} == {"CPU": True, "CPU2": True}
        table = format_queue(during)
        assert table.splitlines()[0].split() == ["gpu", "queued", "running", "served"]
        assert "No scheduler runs" not in table
    finally:
        await stop_scheduling(scheduling, stop)
    # Stopped cleanly: it says so at once, not a minute later.
    assert (await client.get("/health")).json()["served_gpus"] == []
