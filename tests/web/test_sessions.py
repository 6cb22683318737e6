"""Signing in to the pages: a session cookie that is not the token, ends with its token, is
Secure over HTTPS, and authenticates only reading the API."""

from __future__ import annotations

import httpx
import pytest

from cluster_manager.api.app import LOGIN_ATTEMPTS_PER_MINUTE
from cluster_manager.app import App
from cluster_manager.service import Submitter
from cluster_manager.storage.sessions import MAX_SESSIONS_PER_TOKEN
from tests.api.conftest import ADMIN_TOKEN, BOARD
from tests.web.helpers import HTML, rank, sign_in


@pytest.mark.reliability(
    "Access",
    "signing in to the web pages with an API token, then reading the cookie and the stored session",
    "the cookie holds a random session id (HttpOnly, SameSite=Strict), never the token; "
    "only its hash is stored",
)
async def test_signing_in_keeps_a_session_id_not_the_token(app: App, client: httpx.AsyncClient):
    token = await app.service.accounts.issue_token(Submitter("alice", "Alice"))
    answer = await client.post("/login", data={"token": token, "next": f"/leaderboards/{BOARD}"})
    assert answer.status_code == 303 and answer.headers["location"] == f"/leaderboards/{BOARD}"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("cm_session=") and token not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    session_id = cookie.split(";")[0].split("=", 1)[1]
    stored = await app.pool.fetchval("SELECT id_hash FROM web_sessions")
    assert session_id.encode() not in stored  # only its hash is kept
    page = await client.get(f"/leaderboards/{BOARD}", headers=HTML)
    assert 'class="who">Alice<' in page.text and "My submissions" in page.text


async def test_over_https_the_cookie_is_secure(app: App, api):
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="https://web.test") as https:
        token = await app.service.accounts.issue_token(Submitter("alice", "Alice"))
        answer = await https.post("/login", data={"token": token})
        assert "Secure" in answer.headers["set-cookie"]


@pytest.mark.reliability(
    "Access",
    "300 sign-ins in a second from one address, and one token signed in again and again",
    "the 11th sign-in in a minute is refused (429, and no session); one token keeps at most "
    "20 sessions, the oldest closing first",
)
async def test_sign_ins_are_limited_and_sessions_do_not_pile_up(app: App, client):
    token = await app.service.accounts.issue_token(Submitter("alice", "Alice"))
    answers = [await client.post("/login", data={"token": token}) for _ in range(12)]
    assert [a.status_code for a in answers] == [303] * LOGIN_ATTEMPTS_PER_MINUTE + [429] * 2
    assert "over 10 sign-in attempts per minute from this address" in answers[-1].text
    assert "set-cookie" not in answers[-1].headers
    opened = [
        await app.service.sessions.open(token, admin_token=ADMIN_TOKEN)
        for _ in range(MAX_SESSIONS_PER_TOKEN + 5)
    ]
    assert await app.pool.fetchval("SELECT count(*) FROM web_sessions") == MAX_SESSIONS_PER_TOKEN
    assert await app.service.sessions.get(opened[-1], admin_token=ADMIN_TOKEN) is not None
    assert await app.service.sessions.get(opened[0], admin_token=ADMIN_TOKEN) is None


async def test_a_wrong_token_is_refused_on_the_form(client: httpx.AsyncClient):
    answer = await client.post("/login", data={"token": "cm_nope", "next": "/"})
    assert answer.status_code == 401 and "unknown or revoked API token" in answer.text
    assert "set-cookie" not in answer.headers


@pytest.mark.reliability(
    "Access",
    "using a web session after its token was replaced, and replaying a session id after "
    "signing out",
    "signed out: the session ends with its token and at /logout",
)
async def test_a_new_token_or_signing_out_ends_the_session(app: App, client: httpx.AsyncClient):
    await sign_in(app, client, "alice")
    assert 'class="who">alice<' in (await client.get("/")).text
    await app.service.accounts.issue_token(Submitter("alice", "alice"))  # the old token is revoked
    assert 'class="who">' not in (await client.get("/")).text
    await sign_in(app, client, "alice")
    saved = dict(client.cookies)
    sessions = "SELECT count(*) FROM web_sessions"
    before = await app.pool.fetchval(sessions)
    assert (await client.post("/logout")).status_code == 303
    assert await app.pool.fetchval(sessions) == before - 1
    client.cookies.update(saved)  # the old id, replayed, is dead
    assert 'class="who">' not in (await client.get("/")).text


@pytest.mark.reliability(
    "Access",
    "signing in with next=//evil.test, https://evil.test or /\\evil.test (an open redirect)",
    "redirected to / instead",
)
async def test_only_local_paths_are_followed_after_signing_in(app: App, client: httpx.AsyncClient):
    token = await app.service.accounts.issue_token(Submitter("alice", "alice"))
    for target in ("//evil.test/x", "https://evil.test", "/\\evil.test"):
        answer = await client.post("/login", data={"token": token, "next": target})
        assert answer.headers["location"] == "/", target


@pytest.mark.reliability(
    "Access",
    "posting the sign-in form from another site (Origin: http://evil.test)",
    "403, no cookie set",
)
async def test_forms_from_another_site_are_refused(app: App, client: httpx.AsyncClient):
    token = await app.service.accounts.issue_token(Submitter("alice", "alice"))
    answer = await client.post(
        "/login", data={"token": token}, headers={"Origin": "http://evil.test"}
    )
    assert answer.status_code == 403 and "set-cookie" not in answer.headers


@pytest.mark.reliability(
    "Access",
    "deleting a submission through the API with only a signed-in browser's session cookie",
    "401: a cookie authenticates reads (the live events) only; the submission stays",
)
async def test_the_cookie_reads_the_api_but_never_writes(app: App, client: httpx.AsyncClient):
    receipt = await rank(app, "alice", 2e-6)
    await sign_in(app, client, "alice")
    events = await client.get(f"/submissions/{receipt.submission_id}/events")
    assert events.status_code == 200 and "event: done" in events.text
    deleted = await client.delete(f"/user/submissions/{receipt.submission_id}")
    assert deleted.status_code == 401  # a write needs the token itself
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 1


async def test_the_admin_token_signs_in_as_admin(client: httpx.AsyncClient):
    answer = await client.post("/login", data={"token": ADMIN_TOKEN})
    assert answer.status_code == 303
    assert 'class="who">admin<' in (await client.get("/")).text


async def test_behind_a_local_tls_proxy_the_cookie_is_secure(app: App, live_url: str):
    token = await app.service.accounts.issue_token(Submitter("alice", "Alice"))
    async with httpx.AsyncClient(base_url=live_url, timeout=60) as http:
        proxied = await http.post(
            "/login", data={"token": token}, headers={"X-Forwarded-Proto": "https"}
        )
        direct = await http.post("/login", data={"token": token})
    assert "Secure" in proxied.headers["set-cookie"]
    assert "Secure" not in direct.headers["set-cookie"]
