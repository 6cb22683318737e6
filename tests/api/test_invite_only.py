"""Invite-only leaderboards over the API: to anyone who has not joined one (no token, or a
user's who has no code), every route that reads it answers as for a leaderboard that does
not exist; its members and the admin read it as any other."""

from __future__ import annotations

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.service import Submitter
from tests.api.conftest import ADMIN_TOKEN, BOARD, IDENTITY, popcorn_headers, token_of
from tests.storage.helpers import finish_submission

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

GHOST = "ghost"  # a leaderboard that does not exist
ROUTES = {
    "ranking": "/leaderboards/{}",
    "task": "/leaderboards/{}/task",
    "template": "/leaderboards/{}/template/python",
    "gpus": "/gpus/{}",
}
JSON = {"Accept": "application/json"}


@pytest.fixture
async def viewers(app: App, client: httpx.AsyncClient) -> dict[str, dict[str, str]]:
    """BOARD, with carol ranked on it, made invite-only; the headers of each kind of caller."""
    receipt = await app.service.submissions.submit(
        BOARD,
        Submitter("carol", "carol"),
        "submission.py",
        (IDENTITY / "submission.py").read_bytes(),
        gpus=["CPU"],
        mode=Mode.LEADERBOARD,
    )
    await finish_submission(app.pool, receipt, 2e-6)
    member, stranger = await token_of(app, "member"), await token_of(app, "stranger")
    closed = await client.post(f"/admin/leaderboards/{BOARD}/close", headers=ADMIN)
    assert closed.status_code == 200
    minted = await client.post(
        "/admin/invites", headers=ADMIN, json={"leaderboard": BOARD, "count": 1, "max_uses": 1}
    )
    code = minted.json()["codes"][0]
    joined = await client.post("/user/join", headers=popcorn_headers(member), json={"code": code})
    assert joined.json()["status"] == "joined"
    return {
        "anonymous": {},
        "stranger": popcorn_headers(stranger),
        "member": popcorn_headers(member),
        "admin": ADMIN,
    }


async def assert_answered_as_missing(
    client: httpx.AsyncClient, route: str, headers: dict[str, str]
) -> None:
    hidden = await client.get(route.format(BOARD), headers={**JSON, **headers})
    missing = await client.get(route.format(GHOST), headers={**JSON, **headers})
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == {"detail": missing.json()["detail"].replace(GHOST, BOARD)}
    assert hidden.json() == {"detail": f"there is no leaderboard named {BOARD!r}"}


@pytest.mark.reliability(
    "Access",
    "reading an invite-only leaderboard's ranking, task files, template and GPU types over the "
    "API with no token and with the token of a user who has not joined it",
    "404, word for word as for a leaderboard that does not exist",
)
@pytest.mark.parametrize("viewer", ["anonymous", "stranger"])
@pytest.mark.parametrize("route", list(ROUTES.values()), ids=list(ROUTES))
async def test_a_hidden_board_answers_as_a_missing_one(
    client: httpx.AsyncClient, viewers: dict[str, dict[str, str]], route: str, viewer: str
):
    await assert_answered_as_missing(client, route, viewers[viewer])


@pytest.mark.parametrize("viewer", ["member", "admin"])
async def test_members_and_the_admin_read_it_as_before(
    client: httpx.AsyncClient, viewers: dict[str, dict[str, str]], viewer: str
):
    headers = {**JSON, **viewers[viewer]}
    ranking = (await client.get(f"/leaderboards/{BOARD}", headers=headers)).json()
    assert ranking["invite_only"] is True
    assert [e["user"] for e in ranking["rankings"]["CPU"]] == ["carol"]
    task = await client.get(f"/leaderboards/{BOARD}/task", headers=headers)
    assert task.status_code == 200 and "reference.py" in task.json()["files"]
    template = await client.get(f"/leaderboards/{BOARD}/template/python", headers=headers)
    assert template.status_code == 200 and "custom_kernel" in template.text
    gpus = await client.get(f"/gpus/{BOARD}", headers=headers)
    assert gpus.json() == ["CPU", "CPU2"]
    listed = (await client.get("/leaderboards", headers=headers)).json()
    assert [(b["name"], b["invite_only"]) for b in listed] == [(BOARD, True)]


async def test_a_stranger_cannot_probe_it_through_their_submissions_or_a_submit(
    client: httpx.AsyncClient, viewers: dict[str, dict[str, str]]
):
    stranger = viewers["stranger"]
    await assert_answered_as_missing(client, "/user/submissions?leaderboard={}", stranger)
    for name in (BOARD, GHOST):
        refused = await client.post(
            f"/submission/{name}/CPU/test",
            headers=stranger,
            files={"file": ("submission.py", (IDENTITY / "submission.py").read_bytes())},
        )
        assert refused.status_code == 404
        assert refused.json() == {"detail": f"there is no leaderboard named {name!r}"}
    mine = await client.get(f"/user/submissions?leaderboard={BOARD}", headers=viewers["member"])
    assert mine.status_code == 200 and mine.json() == []


async def test_a_banned_user_cannot_join_with_a_code_which_keeps_its_use(
    app: App, client: httpx.AsyncClient
):
    assert (await client.post(f"/admin/leaderboards/{BOARD}/close", headers=ADMIN)).is_success
    minted = await client.post(
        "/admin/invites", headers=ADMIN, json={"leaderboard": BOARD, "count": 1, "max_uses": 1}
    )
    (code,) = minted.json()["codes"]
    mallory = popcorn_headers(await token_of(app, "mallory"))
    banned = await client.put("/admin/bans/mallory", headers=ADMIN, json={"reason": "spam"})
    assert banned.json()["status"] == "banned"

    refused = await client.post("/user/join", headers=mallory, json={"code": code})
    assert refused.status_code == 403
    assert refused.json() == {"detail": "you may not join a leaderboard here: spam"}
    assert (await client.get(f"/gpus/{BOARD}", headers=mallory)).status_code == 404
    (invite,) = (await client.get(f"/admin/leaderboards/{BOARD}/invites", headers=ADMIN)).json()
    assert invite["uses"] == 0
    member = popcorn_headers(await token_of(app, "member"))
    joined = await client.post("/user/join", headers=member, json={"code": code})
    assert joined.json()["status"] == "joined"
