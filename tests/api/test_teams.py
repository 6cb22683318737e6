"""Teams through the HTTP API: create, invite, join, leave, read; a team ranks as one entry
with its best score; the size limit, a second team, bad names and used codes are refused;
an invite-only leaderboard's teams are missing to non-members; the organisers' rules."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.service import Submitter
from tests.api.conftest import ADMIN_TOKEN, BOARD, popcorn_headers, source, token_of
from tests.storage.helpers import finish_submission

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
TEAMS = f"/leaderboards/{BOARD}/teams"
MINE = f"{TEAMS}/mine"
RULES = f"/admin/leaderboards/{BOARD}/teams"


async def headers(app: App, user: str) -> dict[str, str]:
    return popcorn_headers(await token_of(app, user))


async def create(client: httpx.AsyncClient, who: dict[str, str], name: Any) -> httpx.Response:
    return await client.post(TEAMS, headers=who, json={"name": name})


async def code_of(client: httpx.AsyncClient, who: dict[str, str]) -> str:
    answer = await client.post(f"{MINE}/invites", headers=who)
    assert answer.status_code == 201, answer.text
    code: str = answer.json()["code"]
    assert code.startswith("team_")
    return code


async def join(client: httpx.AsyncClient, who: dict[str, str], code: str) -> httpx.Response:
    return await client.post("/teams/join", headers=who, json={"code": code})


async def team_of_two(app: App, client: httpx.AsyncClient) -> tuple[dict[str, str], ...]:
    """Team "red": alice, then bob; their headers."""
    alice, bob = await headers(app, "alice"), await headers(app, "bob")
    assert (await create(client, alice, "red")).status_code == 201
    joined = await join(client, bob, await code_of(client, alice))
    assert joined.status_code == 200, joined.text
    return alice, bob


async def test_create_invite_join_read_and_leave(app: App, client: httpx.AsyncClient):
    alice, bob = await headers(app, "alice"), await headers(app, "bob")
    made = await create(client, alice, "red")
    assert made.status_code == 201, made.text
    assert made.json()["members"] == ["alice"] and made.json()["leaderboard"] == BOARD
    assert made.json()["size_limit"] == 4

    joined = await join(client, bob, await code_of(client, alice))
    assert joined.status_code == 200, joined.text
    assert joined.json()["name"] == "red" and joined.json()["members"] == ["alice", "bob"]

    mine = await client.get(MINE, headers=bob)
    assert mine.status_code == 200 and mine.json()["members"] == ["alice", "bob"]
    listed = await client.get(TEAMS)  # public, as the ranking is
    assert [(t["name"], t["members"]) for t in listed.json()] == [("red", ["alice", "bob"])]

    left = await client.delete(MINE, headers=alice)
    assert left.status_code == 200 and left.json()["left"] == "red"
    gone = await client.get(MINE, headers=alice)
    assert gone.status_code == 404
    assert gone.json()["detail"] == f"you are in no team on {BOARD!r}"
    assert (await client.get(MINE, headers=bob)).json()["members"] == ["bob"]


async def test_a_team_ranks_as_one_entry_with_its_best_score(app: App, client: httpx.AsyncClient):
    await team_of_two(app, client)
    for user, score in (("alice", 5.0), ("bob", 3.0), ("carol", 4.0)):
        receipt = await app.service.submissions.submit(
            BOARD, Submitter(user, user), "submission.py", source(), gpus=["CPU"],
            mode=Mode.LEADERBOARD,
        )  # fmt: skip
        await finish_submission(app.pool, receipt, score)

    view = (await client.get(f"/leaderboards/{BOARD}", params={"gpu": "CPU"})).json()
    entries = [(e["rank"], e["team"], e["user"], e["score"]) for e in view["rankings"]["CPU"]]
    assert entries == [(1, "red", "bob", 3.0), (2, None, "carol", 4.0)]
    assert view["team_size"] == 4 and view["team_quotas"] is False


async def test_a_full_team_and_a_second_team_are_refused(app: App, client: httpx.AsyncClient):
    alice, bob = await team_of_two(app, client)
    code = await code_of(client, alice)
    rules = await client.put(RULES, headers=ADMIN, json={"size": 2})
    assert rules.json() == {"leaderboard": BOARD, "team_size": 2, "team_quotas": False}

    carol = await headers(app, "carol")
    full = await join(client, carol, code)
    assert full.status_code == 409 and "as many as" in full.json()["detail"]
    pointless = await client.post(f"{MINE}/invites", headers=bob)  # nobody could use it
    assert pointless.status_code == 409
    assert pointless.json()["detail"] == (
        f"your team has 2 members, as many as {BOARD!r} allows: nobody could join with a new code"
    )
    second = await create(client, bob, "blue")
    assert second.status_code == 409 and "leave it first" in second.json()["detail"]
    taken = await create(client, carol, "red")
    assert taken.status_code == 409 and "has a team named 'red'" in taken.json()["detail"]
    assert [t["name"] for t in (await client.get(TEAMS)).json()] == ["red"]


@pytest.mark.parametrize(
    ("name", "status", "says"),
    [
        (" red", 400, "may only hold"),
        ("x" * 41, 400, "at most 40 characters"),
        ("red/blue", 400, "may only hold"),
        (7, 422, "name:"),
        (None, 422, "name:"),
    ],
)
async def test_a_bad_name_is_refused_with_its_reason(
    app: App, client: httpx.AsyncClient, name: Any, status: int, says: str
):
    answer = await create(client, await headers(app, "alice"), name)
    assert answer.status_code == status and says in answer.json()["detail"], answer.text
    assert (await client.get(TEAMS)).json() == []


async def test_a_code_is_good_once(app: App, client: httpx.AsyncClient):
    alice, _bob = await team_of_two(app, client)
    code = await code_of(client, alice)
    carol, dave = await headers(app, "carol"), await headers(app, "dave")
    assert (await join(client, carol, code)).status_code == 200
    again = await join(client, dave, code)
    assert again.status_code == 404 and "unknown or was used" in again.json()["detail"]
    unknown = await join(client, dave, "team_nosuch")
    assert unknown.status_code == 404
    members = (await client.get(MINE, headers=alice)).json()["members"]
    assert members == ["alice", "bob", "carol"]


async def test_an_invite_without_a_team_or_a_token_is_refused(app: App, client: httpx.AsyncClient):
    lone = await client.post(f"{MINE}/invites", headers=await headers(app, "alice"))
    assert lone.status_code == 409 and "in no team" in lone.json()["detail"]
    assert (await client.post(TEAMS, json={"name": "red"})).status_code == 401
    nobody = await create(client, ADMIN, "red")  # the admin token is nobody's
    assert nobody.status_code == 403


async def test_an_invite_only_boards_teams_are_missing_to_non_members(
    app: App, client: httpx.AsyncClient
):
    await team_of_two(app, client)
    assert (await client.post(f"/admin/leaderboards/{BOARD}/close", headers=ADMIN)).is_success
    outsider = await headers(app, "mallory")

    assert (await client.get(TEAMS)).status_code == 404
    assert (await client.get(TEAMS, headers=outsider)).status_code == 404
    assert (await create(client, outsider, "blue")).status_code == 404
    assert (await client.get(MINE, headers=outsider)).status_code == 404
    admin_sees = await client.get(TEAMS, headers=ADMIN)
    assert [t["name"] for t in admin_sees.json()] == ["red"]


async def test_the_organisers_set_the_rules(app: App, client: httpx.AsyncClient):
    shared = await client.put(RULES, headers=ADMIN, json={"quotas": True})
    assert shared.json() == {"leaderboard": BOARD, "team_size": 4, "team_quotas": True}
    both = await client.put(RULES, headers=ADMIN, json={"size": 3, "quotas": False})
    assert both.json() == {"leaderboard": BOARD, "team_size": 3, "team_quotas": False}
    board = await app.service.leaderboards.get(BOARD)
    assert (board.team_size, board.team_quotas) == (3, False)


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"size": 0}, 400, "a team has 1 to 100 members, not 0"),
        ({"size": 101}, 400, "not 101"),
        ({"size": "3"}, 422, "size:"),
        ({"size": 2.5}, 422, "size:"),
        ({"quotas": "yes"}, 422, "quotas:"),
        ({"quotas": 1}, 422, "quotas:"),
    ],
)
async def test_bad_rules_are_refused(
    app: App, client: httpx.AsyncClient, body: dict[str, Any], status: int, says: str
):
    answer = await client.put(RULES, headers=ADMIN, json=body)
    assert answer.status_code == status and says in answer.json()["detail"], answer.text
    board = await app.service.leaderboards.get(BOARD)
    assert (board.team_size, board.team_quotas) == (4, False)


async def test_rules_of_a_missing_leaderboard_are_404(client: httpx.AsyncClient):
    answer = await client.put("/admin/leaderboards/nosuch/teams", headers=ADMIN, json={"size": 2})
    assert answer.status_code == 404


async def test_a_banned_user_is_refused_every_team_action(app: App, client: httpx.AsyncClient):
    alice, _bob = await team_of_two(app, client)
    code = await code_of(client, alice)
    carol = await headers(app, "carol")
    for user in ("alice", "carol"):
        banned = await client.put(f"/admin/bans/{user}", headers=ADMIN, json={"reason": "spam"})
        assert banned.json()["status"] == "banned"
    attempts = {
        "create a team": await create(client, carol, "blue"),
        "join a team": await join(client, carol, code),
        "invite to a team": await client.post(f"{MINE}/invites", headers=alice),
        "leave a team": await client.delete(MINE, headers=alice),
    }
    for action, answer in attempts.items():
        assert answer.status_code == 403, answer.text
        assert answer.json()["detail"] == f"you may not {action} here: spam"
    assert [(t["name"], t["members"]) for t in (await client.get(TEAMS)).json()] == [
        ("red", ["alice", "bob"])
    ]


async def test_a_team_code_of_an_invite_only_board_is_unknown_to_a_non_member(
    app: App, client: httpx.AsyncClient
):
    """A stranger holding a code of a board they may not see reads what an unknown code
    reads, word for word: nothing names the board or says that it is invite-only."""
    alice, _bob = await team_of_two(app, client)
    code = await code_of(client, alice)
    assert (await client.post(f"/admin/leaderboards/{BOARD}/close", headers=ADMIN)).is_success
    stranger = await headers(app, "mallory")
    hidden = await join(client, stranger, code)
    unknown = await join(client, stranger, "team_nosuch")
    assert hidden.status_code == unknown.status_code == 404
    assert (
        hidden.json()
        == unknown.json()
        == {"detail": "that team code is unknown or was used already"}
    )
    for route in (TEAMS, "/leaderboards/ghost/teams"):
        made = await client.post(route, headers=stranger, json={"name": "blue"})
        assert made.status_code == 404
    missing = await client.post("/leaderboards/ghost/teams", headers=stranger, json={"name": "b"})
    closed = await create(client, stranger, "blue")
    assert closed.json()["detail"] == missing.json()["detail"].replace("ghost", BOARD)
    assert "invite-only" not in closed.text + hidden.text


async def test_a_members_codes_go_when_they_leave_and_are_bounded(
    app: App, client: httpx.AsyncClient
):
    alice, bob = await team_of_two(app, client)
    bobs = await code_of(client, bob)
    alices = await code_of(client, alice)
    assert (await client.delete(MINE, headers=bob)).status_code == 200
    carol, dave = await headers(app, "carol"), await headers(app, "dave")
    stale = await join(client, carol, bobs)
    assert stale.status_code == 404 and "unknown or was used" in stale.json()["detail"]
    assert (await join(client, dave, alices)).status_code == 200  # alice is still a member

    for _ in range(10):  # her first two were used: 10 unused ones, the most one member may
        await code_of(client, alice)
    over = await client.post(f"{MINE}/invites", headers=alice)
    assert over.status_code == 409
    assert over.json()["detail"] == (
        f"you hold 10 unused team codes on {BOARD!r}, as many as one member may: "
        "each stays good until used or you leave the team"
    )
    assert (await client.post(f"{MINE}/invites", headers=dave)).status_code == 201
