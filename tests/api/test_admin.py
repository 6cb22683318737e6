"""The admin endpoints: only the admin token passes; pauses, bans, stats and submissions as
popcorn-cli's `admin` commands and organisers' scripts call them."""

from __future__ import annotations

import httpx
import pytest

from cluster_manager.app import App
from tests.api.conftest import ADMIN_TOKEN, BOARD, popcorn_headers, source, token_of
from tests.storage.helpers import finish_submission

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ROUTES = [
    ("POST", "/admin/stop"),
    ("POST", "/admin/start"),
    ("GET", "/admin/stats"),
    ("GET", "/admin/pauses"),
    ("GET", "/admin/bans"),
    ("PUT", "/admin/bans/alice"),
    ("DELETE", "/admin/bans/alice"),
    ("GET", "/admin/submissions/1"),
    ("DELETE", "/admin/submissions/1"),
    ("POST", "/admin/submissions/1/invalidate"),
    ("POST", "/admin/submissions/1/restore"),
    ("POST", f"/admin/leaderboards/{BOARD}/close"),
    ("POST", f"/admin/leaderboards/{BOARD}/open"),
    ("POST", "/admin/invites"),
    ("GET", f"/admin/leaderboards/{BOARD}/invites"),
    ("DELETE", "/admin/invites/inv_x"),
    ("PUT", "/admin/quotas/alice"),
    ("POST", f"/admin/leaderboards/{BOARD}/rerun"),
    ("DELETE", "/admin/quotas/alice"),
    ("POST", "/admin/leaderboards"),
    ("DELETE", f"/admin/leaderboards/{BOARD}"),
    ("PUT", f"/admin/leaderboards/{BOARD}/channel-policy"),
    ("PUT", f"/admin/leaderboards/{BOARD}/after-deadline"),
    ("PUT", f"/admin/leaderboards/{BOARD}/teams"),
    ("GET", "/admin/channel-policies"),
    ("GET", "/admin/after-deadline-refusals"),
]


async def submit_as(client: httpx.AsyncClient, token: str, mode: str = "test") -> httpx.Response:
    return await client.post(
        f"/submission/{BOARD}/CPU/{mode}",
        headers=popcorn_headers(token),
        files={"file": ("submission.py", source())},
    )


@pytest.mark.reliability(
    "Access",
    "calling every admin endpoint with no token and with a user's token",
    "401 and 403; nothing paused, banned or deleted",
)
@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_only_the_admin_token_passes(
    app: App, client: httpx.AsyncClient, method: str, path: str
):
    token = await token_of(app, "alice")
    anonymous = await client.request(method, path, json={"reason": "x"})
    assert anonymous.status_code == 401
    as_user = await client.request(
        method, path, json={"reason": "x"}, headers=popcorn_headers(token)
    )
    assert as_user.status_code == 403 and "admin token only" in as_user.json()["detail"]
    assert await app.service.controls.pauses() == [] and await app.service.controls.bans() == []
    assert [b.name for b in await app.service.leaderboards.all()] == [BOARD]


async def test_stop_and_start_as_popcorn_cli_sends_them(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    stopped = await client.post("/admin/stop", headers={**ADMIN, "Content-Length": "0"})
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    refused = await submit_as(client, token)
    assert refused.status_code == 503
    assert "paused everywhere: submissions are paused by the organisers" in refused.json()["detail"]
    started = await client.post("/admin/start", headers={**ADMIN, "Content-Length": "0"})
    assert started.json() == {"status": "started", "leaderboard": None, "was_paused": True}
    assert (await submit_as(client, token)).status_code == 202


async def test_a_pause_of_one_leaderboard_with_its_reason(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    body = {"leaderboard": BOARD, "reason": "the reference is being fixed"}
    assert (await client.post("/admin/stop", headers=ADMIN, json=body)).status_code == 200
    listed = (await client.get("/admin/pauses", headers=ADMIN)).json()
    assert [(p["leaderboard"], p["reason"], p["paused_by"]) for p in listed] == [
        (BOARD, "the reference is being fixed", "admin (API)")
    ]
    refused = await submit_as(client, token)
    assert refused.status_code == 503 and "the reference is being fixed" in refused.text
    empty = await client.post("/admin/stop", headers=ADMIN, json={"reason": " "})
    assert empty.status_code == 400 and "say why" in empty.json()["detail"]
    unknown = await client.post("/admin/stop", headers=ADMIN, json={"leaderboard": "nope"})
    assert unknown.status_code == 404


@pytest.mark.reliability(
    "Access",
    "a banned user submitting through the API (popcorn-cli's polling and streaming forms)",
    "403 with the ban's reason; their ranking hidden until unbanned, never deleted",
)
async def test_a_ban_refuses_submissions_and_hides_the_ranking(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    accepted = await submit_as(client, token, "leaderboard")
    receipt = await app.service.submissions.report(accepted.json()["details"]["id"])
    await finish_submission(app.pool, receipt, 1e-6)
    assert len((await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]) == 1
    banned = await client.put("/admin/bans/alice", headers=ADMIN, json={"reason": "spam"})
    assert banned.json()["status"] == "banned"
    for path in (f"/submission/{BOARD}/CPU/test", f"/{BOARD}/CPU/test"):
        refused = await client.post(
            path, headers=popcorn_headers(token), files={"file": ("s.py", source())}
        )
        assert refused.status_code == 403 and "spam" in refused.json()["detail"], path
    assert (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"] == []
    assert (await client.delete("/admin/bans/alice", headers=ADMIN)).json()["status"] == "unbanned"
    assert len((await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]) == 1


async def test_stats_and_any_submission(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    submission_id = (await submit_as(client, token)).json()["details"]["id"]
    stats = (await client.get("/admin/stats", headers=ADMIN)).json()
    assert stats["submissions"] == 1 and stats["gpus"]["CPU"]["queued"] == 1
    day = (await client.get("/admin/stats?last_day_only=true", headers=ADMIN)).json()
    assert day["since"] is not None and day["submissions"] == 1
    found = await client.get(f"/admin/submissions/{submission_id}", headers=ADMIN)
    assert found.status_code == 200 and found.json()["id"] == submission_id
    still_running = await client.delete(f"/admin/submissions/{submission_id}", headers=ADMIN)
    assert still_running.status_code == 409


async def test_invalidate_and_restore_a_submission(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    submission_id = (await submit_as(client, token, "leaderboard")).json()["details"]["id"]
    await finish_submission(app.pool, await app.service.submissions.report(submission_id), 1e-6)
    body = {"reason": "hard-coded the answer"}
    answer = await client.post(
        f"/admin/submissions/{submission_id}/invalidate", headers=ADMIN, json=body
    )
    assert answer.json() == {"status": "invalidated", "id": submission_id}
    assert (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"] == []
    mine = await client.get(f"/user/submissions/{submission_id}", headers=popcorn_headers(token))
    assert mine.json()["invalidated"] == "hard-coded the answer (admin (API))"
    await client.post(f"/admin/submissions/{submission_id}/restore", headers=ADMIN)
    assert len((await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]) == 1
    missing = await client.post("/admin/submissions/999999/invalidate", headers=ADMIN, json=body)
    assert missing.status_code == 404


async def test_invite_only_leaderboards_over_http(app: App, client: httpx.AsyncClient):
    tokens = {user: await token_of(app, user) for user in ("alice", "bob")}
    closed = await client.post(f"/admin/leaderboards/{BOARD}/close", headers=ADMIN)
    assert closed.json()["status"] == "invite-only"
    listed = (await client.get("/leaderboards", headers=popcorn_headers(tokens["alice"]))).json()
    assert listed == []
    assert [b["name"] for b in (await client.get("/leaderboards", headers=ADMIN)).json()] == [BOARD]
    refused = await submit_as(client, tokens["alice"])  # as for a board that does not exist
    assert refused.status_code == 404 and "no leaderboard named" in refused.json()["detail"]

    minted = await client.post(
        "/admin/invites", headers=ADMIN, json={"leaderboard": BOARD, "count": 2, "max_uses": 1}
    )
    first, second = minted.json()["codes"]
    joined = await client.post(
        "/user/join", headers=popcorn_headers(tokens["alice"]), json={"code": first}
    )
    assert joined.json() == {"leaderboard": BOARD, "status": "joined"}
    reused = await client.post(
        "/user/join", headers=popcorn_headers(tokens["bob"]), json={"code": first}
    )
    assert reused.status_code == 404 and "used as often as it may be" in reused.json()["detail"]
    assert (await submit_as(client, tokens["alice"])).status_code == 202
    assert [
        b["name"]
        for b in (
            await client.get("/leaderboards", headers=popcorn_headers(tokens["alice"]))
        ).json()
    ] == [BOARD]
    revoked = await client.delete(f"/admin/invites/{second}", headers=ADMIN)
    assert revoked.json()["status"] == "revoked"
    codes = (await client.get(f"/admin/leaderboards/{BOARD}/invites", headers=ADMIN)).json()
    assert sorted((c["uses"], c["revoked"]) for c in codes) == [(0, True), (1, False)]
    opened = await client.post(f"/admin/leaderboards/{BOARD}/open", headers=ADMIN)
    assert opened.json()["status"] == "open"
    assert (await submit_as(client, tokens["bob"])).status_code == 202


async def test_a_quota_override_and_the_retry_after_of_a_refusal(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    answer = await client.put("/admin/quotas/alice", headers=ADMIN, json={"daily": 1})
    assert answer.json() == {"status": "set", "user": "alice", "per_hour": None, "daily": 1}
    assert (await submit_as(client, token)).status_code == 202
    refused = await submit_as(client, token)
    assert refused.status_code == 429 and "1 submissions a day" in refused.json()["detail"]
    assert 86000 < int(refused.headers["Retry-After"]) <= 86401
    bad = await client.put("/admin/quotas/alice", headers=ADMIN, json={"daily": 0})
    assert bad.status_code == 400
    cleared = await client.delete("/admin/quotas/alice", headers=ADMIN)
    assert cleared.json()["status"] == "cleared"
    assert (await submit_as(client, token)).status_code == 202


async def test_rerun_queues_the_ranked_submissions_again(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    submission_id = (await submit_as(client, token, "leaderboard")).json()["details"]["id"]
    await finish_submission(app.pool, await app.service.submissions.report(submission_id), 1e-6)
    answer = await client.post(f"/admin/leaderboards/{BOARD}/rerun", headers=ADMIN, json={})
    found = answer.json()
    queued = found.pop("queued")
    assert found == {
        "status": "queued",
        "leaderboard": BOARD,
        "submissions": [submission_id],
        "jobs": 2,
    }
    assert [(j["submission_id"], j["secret"], j["state"]) for j in queued] == [
        (submission_id, False, "queued"),
        (submission_id, True, "queued"),
    ]
    queue = (await client.get("/queue", headers=popcorn_headers(token))).json()
    assert [j["submission_id"] for j in queue["mine"]] == [submission_id, submission_id]
    nothing = await client.post(
        f"/admin/leaderboards/{BOARD}/rerun", headers=ADMIN, json={"user": "bob"}
    )
    assert nothing.status_code == 404


async def test_a_channel_policy_is_set_and_listed_and_a_bad_one_refused(
    app: App, client: httpx.AsyncClient
):
    path = f"/admin/leaderboards/{BOARD}/channel-policy"
    headers = ADMIN
    bad = await client.put(path, headers=headers, json={"policy": "everyone"})
    assert bad.status_code == 400 and "ranked, none, all" in bad.json()["detail"]
    assert (await app.service.leaderboards.get(BOARD)).channel_policy.value == "ranked"
    done = await client.put(path, headers=headers, json={"policy": "all"})
    assert done.json() == {"leaderboard": BOARD, "channel_policy": "all"}
    listed = (await client.get("/admin/channel-policies", headers=headers)).json()
    assert [(p["leaderboard"], p["policy"]) for p in listed] == [(BOARD, "all")]
    view = await client.get(f"/leaderboards/{BOARD}", headers={"Accept": "application/json"})
    assert view.json()["channel_policy"] == "all"
