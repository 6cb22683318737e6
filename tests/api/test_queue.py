"""GET /queue: every GPU type's line for anyone; a user's own jobs and places only for them."""

from __future__ import annotations

import httpx

from cluster_manager.app import App
from tests.api.conftest import BOARD, popcorn_headers, source, token_of


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
