"""Runs after the deadline through the HTTP API and the CLI pointed at it: an ended
leaderboard takes them, marks them, ranks them on their own (`?after_deadline=true`), never
in the competition's ranking; the organisers' switch turns them off and on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from cluster_manager.api.models.submissions import SubmitAccepted
from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.service import Submitter
from tests.api.conftest import ADMIN_TOKEN, BOARD, popcorn_headers, source, token_of
from tests.api.test_remote_cli import run_cli
from tests.storage.helpers import finish_submission

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SWITCH = f"/admin/leaderboards/{BOARD}/after-deadline"
ALICE = Submitter("alice", "alice")
IN_TIME_SCORE = 5.0


@pytest.fixture
async def ended(app: App) -> int:
    """The board with Alice ranked in time, then its deadline an hour ago; her submission's
    id."""
    receipt = await app.service.submissions.submit(
        BOARD, ALICE, "submission.py", source(), gpus=["CPU"], mode=Mode.LEADERBOARD
    )
    await finish_submission(app.pool, receipt, IN_TIME_SCORE)
    await app.pool.execute("UPDATE leaderboards SET deadline = now() - interval '1 hour'")
    return receipt.submission_id


async def submit(client: httpx.AsyncClient, token: str, mode: str) -> httpx.Response:
    return await client.post(
        f"/submission/{BOARD}/CPU/{mode}",
        headers=popcorn_headers(token),
        files={"file": ("submission.py", source())},
    )


async def ranked_after_the_deadline(app: App, client: httpx.AsyncClient, user: str) -> int:
    """`user`'s ranked submission, taken through the API and finished at 1.0; its id."""
    answer = await submit(client, await token_of(app, user), "leaderboard")
    assert answer.status_code == 202, answer.text
    assert answer.json()["receipt"]["after_deadline"] is True
    receipt = SubmitAccepted.model_validate(answer.json()).receipt.to_record()
    assert receipt.after_deadline
    await finish_submission(app.pool, receipt, 1.0)
    return receipt.submission_id


async def ranking(client: httpx.AsyncClient, **query: str) -> dict[str, Any]:
    answer = await client.get(f"/leaderboards/{BOARD}", params={"gpu": "CPU", **query})
    assert answer.status_code == 200, answer.text
    view: dict[str, Any] = answer.json()
    return view


def entries(view: dict[str, Any]) -> list[tuple[int, str, float]]:
    return [(e["rank"], e["user"], e["score"]) for e in view["rankings"]["CPU"]]


async def test_a_ranked_run_after_the_deadline_ranks_on_its_own(
    app: App, client: httpx.AsyncClient, ended: int
):
    late = await ranked_after_the_deadline(app, client, "bob")

    competition = await ranking(client)
    after = await ranking(client, after_deadline="true")
    assert competition["after_deadline"] is False and competition["after_deadline_runs"] is True
    assert entries(competition) == [(1, "alice", IN_TIME_SCORE)]
    assert after["after_deadline"] is True and entries(after) == [(1, "bob", 1.0)]

    bob = popcorn_headers(await token_of(app, "bob"))
    view = (await client.get(f"/user/submissions/{late}", headers=bob)).json()
    assert view["after_deadline"] is True
    assert [(p["rank"], p["after_deadline"]) for p in view["placements"]] == [(1, True)]
    listed = (await client.get("/user/submissions", headers=bob)).json()
    assert [(s["id"], s["after_deadline"]) for s in listed] == [(late, True)]
    in_time = (await client.get(f"/admin/submissions/{ended}", headers=ADMIN)).json()
    assert in_time["after_deadline"] is False
    assert [(p["rank"], p["after_deadline"]) for p in in_time["placements"]] == [(1, False)]


async def test_an_open_board_has_no_run_ranked_after_its_deadline(
    app: App, client: httpx.AsyncClient
):
    receipt = await app.service.submissions.submit(
        BOARD, ALICE, "submission.py", source(), gpus=["CPU"], mode=Mode.LEADERBOARD
    )
    assert not receipt.after_deadline
    await finish_submission(app.pool, receipt, 2.0)
    assert entries(await ranking(client)) == [(1, "alice", 2.0)]
    assert entries(await ranking(client, after_deadline="true")) == []


async def test_the_organisers_switch_refuses_runs_after_the_deadline_then_takes_them(
    app: App, client: httpx.AsyncClient, ended: int
):
    token = await token_of(app, "bob")
    off = await client.put(SWITCH, headers=ADMIN, json={"allowed": False})
    assert off.status_code == 200 and off.json() == {
        "leaderboard": BOARD,
        "after_deadline_runs": False,
    }
    assert (await ranking(client))["after_deadline_runs"] is False
    (refusal,) = (await client.get("/admin/after-deadline-refusals", headers=ADMIN)).json()
    assert refusal["leaderboard"] == BOARD and refusal["set_by"] and refusal["set_at"]
    before = await app.pool.fetchval("SELECT count(*) FROM submissions")
    for mode in ("test", "benchmark", "leaderboard"):
        refused = await submit(client, token, mode)
        assert refused.status_code == 403, refused.text
        assert "take no runs after it" in refused.json()["detail"]
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == before

    on = await client.put(SWITCH, headers=ADMIN, json={"allowed": True})
    assert on.json() == {"leaderboard": BOARD, "after_deadline_runs": True}
    assert (await client.get("/admin/after-deadline-refusals", headers=ADMIN)).json() == []
    taken = await submit(client, token, "test")
    assert taken.status_code == 202 and taken.json()["receipt"]["after_deadline"] is True


@pytest.mark.parametrize(
    "body", [{}, {"allowed": "maybe"}, {"allowed": "yes"}, {"allowed": 1}, {"allowed": None}]
)
async def test_a_bad_switch_is_refused_and_changes_nothing(
    app: App, client: httpx.AsyncClient, body: dict[str, Any]
):
    answer = await client.put(SWITCH, headers=ADMIN, json=body)
    assert answer.status_code == 422 and "allowed" in answer.json()["detail"], answer.text
    assert (await app.service.leaderboards.get(BOARD)).after_deadline_runs


async def test_the_switch_is_the_admins_and_names_an_existing_board(
    app: App, client: httpx.AsyncClient
):
    user = popcorn_headers(await token_of(app, "alice"))
    refused = await client.put(SWITCH, headers=user, json={"allowed": False})
    assert refused.status_code == 403
    missing = await client.put(
        "/admin/leaderboards/nope/after-deadline", headers=ADMIN, json={"allowed": False}
    )
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
    assert (await app.service.leaderboards.get(BOARD)).after_deadline_runs


async def test_the_cli_over_the_api_shows_the_ranking_and_flips_the_switch(
    app: App, client: httpx.AsyncClient, live_url: str, tmp_path: Path, ended: int
):
    await ranked_after_the_deadline(app, client, "bob")
    admin = {"CLUSTER_MANAGER_ADMIN_TOKEN": ADMIN_TOKEN}

    shown = await run_cli(
        "leaderboard", "show", BOARD, "--after-deadline", url=live_url, token=None, cwd=tmp_path
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith(f"{BOARD} — runs after the deadline\n")
    assert "#1    bob" in shown.stdout and "alice" not in shown.stdout
    competition = await run_cli(
        "leaderboard", "show", BOARD, url=live_url, token=None, cwd=tmp_path
    )
    assert "#1    alice" in competition.stdout and "bob" not in competition.stdout
    assert "after the deadline" not in competition.stdout

    off = await run_cli(
        "admin", "after-deadline", BOARD, "off", url=live_url, token=None, cwd=tmp_path, env=admin
    )
    assert off.returncode == 0, off.stdout + off.stderr
    assert off.stdout.strip() == f"{BOARD} takes no runs after its deadline"
    assert not (await app.service.leaderboards.get(BOARD)).after_deadline_runs
    on = await run_cli(
        "admin", "after-deadline", BOARD, "on", url=live_url, token=None, cwd=tmp_path, env=admin
    )
    assert on.stdout.strip() == f"{BOARD} takes runs after its deadline"
    assert (await app.service.leaderboards.get(BOARD)).after_deadline_runs


async def exported(app: App) -> list[Any]:
    return [row async for page in app.service.exports.rankings(BOARD) for row in page]


async def final_standings(app: App, client: httpx.AsyncClient) -> tuple[Any, ...]:
    """The competition's ranking (API), its score history and its export (service)."""
    view = await ranking(client)
    teams = [(e["rank"], e["user"], e["team"], e["score"]) for e in view["rankings"]["CPU"]]
    history = await app.service.leaderboards.score_history(BOARD, "CPU")
    return teams, history.points, await exported(app)


async def test_team_changes_and_deletions_after_the_deadline_leave_the_final_standings(
    app: App, client: httpx.AsyncClient
):
    """Bob and carol ranked in time, alice and bob a team: after the deadline, making,
    joining or leaving a team and an author's delete of a ranked submission are refused with
    why, and the ranking, its history and its export stay as they were at the deadline."""
    alice, bob, carol = [popcorn_headers(await token_of(app, u)) for u in ("alice", "bob", "carol")]
    assert (
        await client.post(f"/leaderboards/{BOARD}/teams", headers=alice, json={"name": "red"})
    ).status_code == 201
    code = (await client.post(f"/leaderboards/{BOARD}/teams/mine/invites", headers=alice)).json()[
        "code"
    ]
    assert (await client.post("/teams/join", headers=bob, json={"code": code})).status_code == 200
    spare = (await client.post(f"/leaderboards/{BOARD}/teams/mine/invites", headers=alice)).json()[
        "code"
    ]
    ids = {}
    for user, score in (("bob", 3.0), ("carol", 4.0)):
        receipt = await app.service.submissions.submit(
            BOARD,
            Submitter(user, user),
            "submission.py",
            source(),
            gpus=["CPU"],
            mode=Mode.LEADERBOARD,
        )
        await finish_submission(app.pool, receipt, score)
        ids[user] = receipt.submission_id
    await app.pool.execute("UPDATE leaderboards SET deadline = now() - interval '1 hour'")
    before = await final_standings(app, client)
    assert before[0] == [(1, "bob", "red", 3.0), (2, "carol", None, 4.0)]

    attempts = [
        await client.post("/teams/join", headers=carol, json={"code": spare}),
        await client.post(f"/leaderboards/{BOARD}/teams", headers=carol, json={"name": "blue"}),
        await client.delete(f"/leaderboards/{BOARD}/teams/mine", headers=bob),
        await client.post(f"/leaderboards/{BOARD}/teams/mine/invites", headers=alice),
        await client.delete(f"/user/submissions/{ids['carol']}", headers=carol),
    ]
    for answer in attempts:
        assert answer.status_code == 403, answer.text
        assert "its final standings are fixed, so you cannot" in answer.json()["detail"]
    assert "cannot delete a ranked submission" in attempts[-1].json()["detail"]
    assert await final_standings(app, client) == before
    assert (await client.get(f"/leaderboards/{BOARD}/teams/mine", headers=bob)).json()[
        "members"
    ] == ["alice", "bob"]

    # A run after the deadline is no part of the final standings: its author may delete it.
    late = await ranked_after_the_deadline(app, client, "dave")
    dave = popcorn_headers(await token_of(app, "dave"))
    assert (await client.delete(f"/user/submissions/{late}", headers=dave)).status_code == 200
    # The organisers keep their own hand on the standings: an admin's delete is taken.
    assert (await client.delete(f"/admin/submissions/{ids['carol']}", headers=ADMIN)).is_success
    assert (await final_standings(app, client))[0] == [(1, "bob", "red", 3.0)]
