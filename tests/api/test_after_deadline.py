"""Runs after the deadline through the HTTP API and the CLI pointed at it: an ended
leaderboard takes them, marks them, ranks them on their own (`?after_deadline=true`), never
in the competition's ranking; the organisers' switch turns them off and on. The final
standings stay what the deadline saw, whatever teams do after it and whatever authors try to
delete."""

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


async def placements(client: httpx.AsyncClient, submission_id: int) -> list[Any]:
    view = await client.get(f"/admin/submissions/{submission_id}", headers=ADMIN)
    return [(p["gpu"], p["rank"], p["after_deadline"]) for p in view.json()["placements"]]


async def ranked_then_ended(app: App, scores: dict[str, float]) -> list[int]:
    """Each user's ranked submission, finished with its score; then the board's deadline
    passes. The submissions' ids, in the order given."""
    ids = []
    for user, score in scores.items():
        receipt = await app.service.submissions.submit(
            BOARD, Submitter(user, user), "submission.py", source(), gpus=["CPU"],
            mode=Mode.LEADERBOARD,
        )  # fmt: skip
        await finish_submission(app.pool, receipt, score)
        ids.append(receipt.submission_id)
    await app.pool.execute("UPDATE leaderboards SET deadline = now()")
    return ids


async def final_standings(
    app: App, client: httpx.AsyncClient, ranked: list[int]
) -> tuple[Any, ...]:
    """The competition's ranking (API), its score history, its export (service) and the
    placements of the submissions `ranked` (API)."""
    view = await ranking(client)
    teams = [(e["rank"], e["user"], e["team"], e["score"]) for e in view["rankings"]["CPU"]]
    history = await app.service.leaderboards.score_history(BOARD, "CPU")
    places = [await placements(client, i) for i in ranked]
    return teams, history.points, await exported(app), places


async def test_team_changes_after_the_deadline_leave_the_final_standings(
    app: App, client: httpx.AsyncClient
):
    """At the deadline alice and bob are team red, bob ranked at 3.0, carol and dave on their
    own at 4.0 and 5.0. After it, carol and dave make a team, bob and then alice leave red
    (disbanding it) and erin takes its name: each change is taken, and the competition's
    ranking, history, export and placements stay as the deadline left them; the ranking of
    the runs after the deadline reads the teams as they are now."""
    users = ("alice", "bob", "carol", "dave", "erin")
    alice, bob, carol, dave, erin = [popcorn_headers(await token_of(app, u)) for u in users]
    teams = f"/leaderboards/{BOARD}/teams"
    assert (await client.post(teams, headers=alice, json={"name": "red"})).status_code == 201
    code = (await client.post(f"{teams}/mine/invites", headers=alice)).json()["code"]
    assert (await client.post("/teams/join", headers=bob, json={"code": code})).status_code == 200
    spare = (await client.post(f"{teams}/mine/invites", headers=alice)).json()["code"]
    ids = await ranked_then_ended(app, {"bob": 3.0, "carol": 4.0, "dave": 5.0})
    before = await final_standings(app, client, ids)
    assert before[0] == [
        (1, "bob", "red", 3.0),
        (2, "carol", None, 4.0),
        (3, "dave", None, 5.0),
    ]
    assert [row["team"] for row in before[2]] == ["red", None, None]
    assert before[3] == [[("CPU", 1, False)], [("CPU", 2, False)], [("CPU", 3, False)]]

    made = await client.post(teams, headers=carol, json={"name": "blue"})
    assert made.status_code == 201, made.text
    blue = (await client.post(f"{teams}/mine/invites", headers=carol)).json()["code"]
    joined = await client.post("/teams/join", headers=dave, json={"code": blue})
    assert joined.status_code == 200 and joined.json()["members"] == ["carol", "dave"]
    assert (await client.delete(f"{teams}/mine", headers=bob)).json()["left"] == "red"
    assert (await client.delete(f"{teams}/mine", headers=alice)).json()["left"] == "red"
    stale = await client.post("/teams/join", headers=erin, json={"code": spare})
    assert stale.status_code == 404  # its minter left: the code went with her
    assert (await client.post(teams, headers=erin, json={"name": "red"})).status_code == 201
    now = [(t["name"], t["members"]) for t in (await client.get(teams)).json()]
    assert now == [("blue", ["carol", "dave"]), ("red", ["erin"])]

    assert await final_standings(app, client, ids) == before
    late = await ranked_after_the_deadline(app, client, "dave")
    after = await ranking(client, after_deadline="true")
    assert [(e["rank"], e["user"], e["team"]) for e in after["rankings"]["CPU"]] == [
        (1, "dave", "blue")
    ]
    assert await placements(client, late) == [("CPU", 1, True)]
    assert await final_standings(app, client, ids) == before


async def test_an_authors_delete_after_the_deadline_is_refused_and_changes_nothing(
    app: App, client: httpx.AsyncClient
):
    """A ranked submission of the competition is part of its final standings: after the
    deadline its author's delete is refused with why, and the ranking, history, export and
    placements are as before. A run after the deadline is not: its author may delete it, and
    the organisers keep their own hand (an admin's delete is taken)."""
    ids = await ranked_then_ended(app, {"bob": 3.0, "carol": 4.0})
    before = await final_standings(app, client, ids)
    assert before[0] == [(1, "bob", None, 3.0), (2, "carol", None, 4.0)]

    carol = popcorn_headers(await token_of(app, "carol"))
    refused = await client.delete(f"/user/submissions/{ids[1]}", headers=carol)
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"].startswith(f"the deadline of {BOARD!r} passed at ")
    assert refused.json()["detail"].endswith(
        "its final standings are fixed, so you cannot delete a ranked submission any more"
    )
    assert await final_standings(app, client, ids) == before

    late = await ranked_after_the_deadline(app, client, "dave")
    dave = popcorn_headers(await token_of(app, "dave"))
    assert (await client.delete(f"/user/submissions/{late}", headers=dave)).status_code == 200
    assert await final_standings(app, client, ids) == before
    assert (await client.delete(f"/admin/submissions/{ids[1]}", headers=ADMIN)).is_success
    assert (await final_standings(app, client, ids[:1]))[0] == [(1, "bob", None, 3.0)]
