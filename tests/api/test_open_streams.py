"""Event streams one token holds open: each follows its jobs in the database until they end,
so a token may hold only so many at once."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from cluster_manager.api.streams import MAX_OPEN_STREAMS
from cluster_manager.app import App
from tests.api.conftest import BOARD, popcorn_headers, source, token_of


@pytest.mark.reliability(
    "Access",
    "one token opening live event streams by the dozen (each re-reads the database every "
    "few seconds until its submission ends)",
    f"the {MAX_OPEN_STREAMS + 1}th is refused 429 before anything is submitted; closing one "
    "lets a new one open",
)
async def test_a_token_holds_only_so_many_streams_open(app: App, live_url: str):
    # No scheduler: the submission stays queued, so its event streams stay open.
    headers = popcorn_headers(await token_of(app, "alice"))
    async with httpx.AsyncClient(base_url=live_url, headers=headers, timeout=30) as http:
        accepted = await http.post(
            f"/submission/{BOARD}/CPU/test", files={"file": ("s.py", source())}
        )
        url = f"/submissions/{accepted.json()['details']['id']}/events"
        async with contextlib.AsyncExitStack() as held:
            for _ in range(MAX_OPEN_STREAMS):
                answer = await held.enter_async_context(http.stream("GET", url))
                assert answer.status_code == 200
            refused = await http.get(url)
            assert refused.status_code == 429, refused.text
            assert "event streams are open with this token already" in refused.json()["detail"]
            submitted = await http.post(f"/{BOARD}/CPU/test", files={"file": ("s.py", source())})
            assert submitted.status_code == 429
            assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 1
        for _ in range(50):  # the server notices the hang-ups
            async with http.stream("GET", url) as again:
                if again.status_code == 200:
                    break
            await asyncio.sleep(0.1)
        assert again.status_code == 200
