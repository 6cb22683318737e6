"""API tokens: random, stored only as a hash, one live per user, revocable; and the answers
to no token, an unknown one, a revoked one, someone else's submission and too many requests."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest

from cluster_manager.api.app import create_api
from cluster_manager.app import App
from cluster_manager.service import Submitter
from cluster_manager.settings import Settings
from tests.api.conftest import ADMIN_TOKEN, BOARD, popcorn_headers, source, token_of


async def test_a_token_is_random_and_only_its_hash_is_stored(app: App):
    first = await token_of(app, "alice")
    assert first.startswith("cm_") and len(first) >= 40
    rows = await app.pool.fetch("SELECT token_hash, revoked_at FROM api_tokens")
    assert [bytes(r["token_hash"]) for r in rows] == [hashlib.sha256(first.encode()).digest()]
    dump = str([dict(r) for r in await app.pool.fetch("SELECT * FROM api_tokens")])
    assert first not in dump


async def test_a_new_token_revokes_the_old_one(app: App, client: httpx.AsyncClient):
    old = await token_of(app, "alice")
    new = await token_of(app, "alice")
    assert old != new
    stale = await client.get("/user/submissions", headers=popcorn_headers(old))
    assert stale.status_code == 401
    assert stale.json() == {"detail": "unknown or revoked API token"}
    fresh = await client.get("/user/submissions", headers={"Authorization": f"Bearer {new}"})
    assert fresh.status_code == 200 and fresh.json() == []
    used = await app.pool.fetchval("SELECT last_used_at FROM api_tokens WHERE revoked_at IS NULL")
    assert used is not None


@pytest.mark.reliability(
    "Access",
    "calling the API with a token after it was revoked, and with one a newer /token replaced",
    "401 unknown or revoked API token",
)
async def test_revoking_stops_the_token(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    assert await app.service.accounts.revoke_token("alice") is True
    assert await app.service.accounts.revoke_token("alice") is False
    answer = await client.get("/user/submissions", headers=popcorn_headers(token))
    assert answer.status_code == 401


@pytest.mark.reliability(
    "Access",
    "submitting through the API with no token, another auth scheme, an empty token or a "
    "9999-character one",
    "401 with WWW-Authenticate and a JSON detail saying how to send a token",
)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic abc"},
        {"X-Popcorn-Cli-Id": ""},
        {"X-Popcorn-Cli-Id": "x" * 9999},
    ],
)
async def test_no_or_unusable_token_is_401(client: httpx.AsyncClient, headers: dict[str, str]):
    answer = await client.post(
        f"/submission/{BOARD}/CPU/test", headers=headers, files={"file": ("s.py", source())}
    )
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert "token" in answer.json()["detail"]


async def test_the_admin_token_reads_but_does_not_submit(app: App, client: httpx.AsyncClient):
    admin = popcorn_headers(ADMIN_TOKEN)
    answer = await client.post(
        f"/submission/{BOARD}/CPU/test", headers=admin, files={"file": ("s.py", source())}
    )
    assert answer.status_code == 403
    assert "acts for no user" in answer.json()["detail"]


async def test_requests_over_the_per_token_limit_get_429_with_retry_after(
    app: App, settings: Settings
):
    limited = create_api(
        app.service, Settings(**{**settings.__dict__, "api_rate_limit_per_minute": 3})
    )
    token = await token_of(app, "alice")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=limited), base_url="http://api.test"
    ) as http:
        codes = [
            (await http.get("/user/submissions", headers=popcorn_headers(token))).status_code
            for _ in range(4)
        ]
        assert codes == [200, 200, 200, 429]
        over = await http.get("/user/submissions", headers=popcorn_headers(token))
        assert 1 <= int(over.headers["Retry-After"]) <= 60
        assert "requests per minute" in over.json()["detail"]
        # Another user's token has its own window.
        other = await token_of(app, "bob")
        assert (
            await http.get("/user/submissions", headers=popcorn_headers(other))
        ).status_code == 200


async def test_a_discord_user_and_their_api_submissions_are_one_user(app: App, client: Any):
    token = await app.service.accounts.issue_token(Submitter("123456789", "alice#discord"))
    answer = await client.post(
        f"/submission/{BOARD}/CPU/test",
        headers=popcorn_headers(token),
        files={"file": ("submission.py", source())},
    )
    assert answer.status_code == 202, answer.text
    users = await app.pool.fetch("SELECT external_id FROM users WHERE external_id = '123456789'")
    assert len(users) == 1
    owner = await app.pool.fetchval(
        "SELECT u.external_id FROM submissions s JOIN users u ON u.id = s.user_id"
    )
    assert owner == "123456789"
