"""Invite-only leaderboards on the pages: signed out or signed in without having joined one,
its page, charts, files, submissions and submit form answer as for a leaderboard that does
not exist; its members and the admin see it as before, marked invite-only."""

from __future__ import annotations

import httpx
import pytest

from cluster_manager.app import App
from tests.api.conftest import ADMIN_TOKEN, BOARD, popcorn_headers, source
from tests.web.helpers import HTML, close, rank, sign_in

GHOST = "ghost"  # a leaderboard that does not exist
ROUTES = {
    "page": "/leaderboards/{}",
    "chart": "/leaderboards/{}/chart/CPU.svg",
    "file": "/leaderboards/{}/files/reference.py",
    "teams": "/leaderboards/{}/teams",
}


async def make_invite_only(app: App) -> str:
    """Closes BOARD to all but its members; an invite code for it."""
    await app.service.invites.set_closed(BOARD, True)
    return (await app.service.invites.mint(BOARD, 1, 5, "org"))[0]


async def sign_in_as(app: App, client: httpx.AsyncClient, viewer: str, code: str) -> None:
    """Signs `client` in as `viewer`: nobody, a user without a code, a member or the admin."""
    if viewer == "admin":
        answer = await client.post("/login", data={"token": ADMIN_TOKEN, "next": "/"})
        assert answer.status_code == 303
    elif viewer != "anonymous":
        token = await sign_in(app, client, viewer)
        if viewer == "member":
            joined = await client.post(
                "/user/join", headers=popcorn_headers(token), json={"code": code}
            )
            assert joined.json()["status"] == "joined"


async def assert_answered_as_missing(client: httpx.AsyncClient, route: str) -> None:
    hidden = await client.get(route.format(BOARD), headers=HTML)
    missing = await client.get(route.format(GHOST), headers=HTML)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.text == missing.text.replace(GHOST, BOARD)
    assert "there is no leaderboard named" in hidden.text


@pytest.mark.reliability(
    "Access",
    "opening an invite-only leaderboard's page, chart and task file signed out and signed in "
    "as a user who has not joined it",
    "404, the same page as for a leaderboard that does not exist",
)
@pytest.mark.parametrize("viewer", ["anonymous", "stranger"])
@pytest.mark.parametrize("route", list(ROUTES.values()), ids=list(ROUTES))
async def test_a_hidden_board_answers_as_a_missing_one(
    app: App, client: httpx.AsyncClient, route: str, viewer: str
):
    await rank(app, "carol", 2e-6)
    await sign_in_as(app, client, viewer, await make_invite_only(app))
    await assert_answered_as_missing(client, route)
    home = await client.get("/")
    assert f'href="/leaderboards/{BOARD}"' not in home.text


@pytest.mark.parametrize("viewer", ["member", "admin"])
async def test_members_and_the_admin_see_it_marked_invite_only(
    app: App, client: httpx.AsyncClient, viewer: str
):
    await rank(app, "carol", 2e-6)
    await sign_in_as(app, client, viewer, await make_invite_only(app))
    page = await client.get(f"/leaderboards/{BOARD}", headers=HTML)
    assert page.status_code == 200 and "carol" in page.text
    assert '<span class="access">invite-only</span>' in page.text
    chart = await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg")
    assert chart.status_code == 200 and "carol" in chart.text
    file = await client.get(f"/leaderboards/{BOARD}/files/reference.py")
    assert file.status_code == 200 and "def ref_kernel" in file.text
    home = await client.get("/")
    assert f'href="/leaderboards/{BOARD}"' in home.text and "invite-only" in home.text


@pytest.mark.parametrize("viewer", ["anonymous", "stranger", "member", "admin"])
async def test_its_ranked_code_after_the_deadline_is_for_those_who_may_see_it(
    app: App, client: httpx.AsyncClient, viewer: str
):
    receipt = await rank(app, "carol", 2e-6)
    await close(app)  # ended: ranked code opens up, to those who may see the board
    await sign_in_as(app, client, viewer, await make_invite_only(app))
    page = await client.get(f"/submissions/{receipt.submission_id}")
    if viewer in ("member", "admin"):
        assert page.status_code == 200 and "def custom_kernel" in page.text
        return
    unknown = await client.get("/submissions/999999")
    assert page.status_code == unknown.status_code
    assert page.text == unknown.text.replace("999999", str(receipt.submission_id))
    assert "custom_kernel" not in page.text


async def test_its_submit_form_refuses_a_stranger_as_for_a_missing_board(
    app: App, client: httpx.AsyncClient
):
    await sign_in_as(app, client, "stranger", await make_invite_only(app))
    answers = {
        name: await client.post(
            f"/leaderboards/{name}/submit",
            headers=HTML,
            files={"file": ("submission.py", source())},
            data={"gpu": "CPU", "mode": "test"},
        )
        for name in (BOARD, GHOST)
    }
    assert answers[BOARD].status_code == answers[GHOST].status_code == 404
    assert answers[BOARD].text == answers[GHOST].text.replace(GHOST, BOARD)


async def test_the_pages_say_ended_for_a_past_deadline(app: App, client: httpx.AsyncClient):
    await close(app)
    page = await client.get(f"/leaderboards/{BOARD}", headers=HTML)
    assert "Ended <time" in page.text and "invite-only" not in page.text
    assert "Closed" not in page.text and "<h2>Ended</h2>" in (await client.get("/")).text
