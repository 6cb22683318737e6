"""Leaderboards created and deleted through the admin API (what `leaderboard create` and
`leaderboard delete` send with CLUSTER_MANAGER_API_URL set), and the JSON a client reads the
service's records back from."""

from __future__ import annotations

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.task import load_task
from cluster_manager.core.task_folder import folder_files, folder_zip
from tests.api.conftest import ADMIN_TOKEN, BOARD, IDENTITY, popcorn_headers, source, token_of
from tests.storage.helpers import finish_submission

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FUTURE = "2099-01-01T00:00:00+00:00"


def task_zip() -> bytes:
    return folder_zip(folder_files(load_task(IDENTITY)))


async def create(
    client: httpx.AsyncClient, data: bytes | None = None, headers: dict[str, str] = ADMIN, **fields
) -> httpx.Response:
    form = {"name": "fresh", "deadline": FUTURE, "gpus": "CPU,CPU2", **fields}
    files = {"file": ("identity_py.zip", task_zip() if data is None else data)}
    return await client.post("/admin/leaderboards", headers=headers, data=form, files=files)


async def test_the_admin_creates_a_leaderboard_from_a_task_zip(app: App, client: httpx.AsyncClient):
    answer = await create(client, creator="org", rate_limit_per_hour="7")
    assert answer.status_code == 201, answer.text
    view = answer.json()
    assert view["status"] == "created" and view["name"] == "fresh"
    assert view["gpu_types"] == ["CPU", "CPU2"] and view["created_at"]
    board = await app.service.leaderboards.get("fresh")
    assert board.task == load_task(IDENTITY)  # the zip carries the task whole
    assert board.rate_limit_per_hour == 7 and board.creator == "org"
    assert board.deadline.isoformat() == FUTURE


@pytest.mark.parametrize(
    ("fields", "data", "status", "says"),
    [
        ({"name": BOARD}, None, 409, "already exists"),
        ({"deadline": "someday"}, None, 400, "deadline"),
        ({"deadline": "2001-01-01T00:00:00Z"}, None, 400, "has already passed"),
        ({"gpus": "H100"}, None, 400, "H100"),
        ({"gpus": ""}, None, 400, "at least one GPU type"),
        ({"name": "Bad Name"}, None, 400, "name"),
        ({"rate_limit_per_hour": "lots"}, None, 400, "rate_limit_per_hour must be a whole"),
        ({}, b"not a zip", 400, "not a valid zip archive"),
    ],
)
async def test_a_bad_creation_is_refused_and_stores_nothing(
    app: App, client: httpx.AsyncClient, fields, data, status, says
):
    answer = await create(client, data, **fields)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"]
    assert [b.name for b in await app.service.leaderboards.all()] == [BOARD]


async def test_only_the_admin_token_creates_or_deletes(app: App, client: httpx.AsyncClient):
    user = popcorn_headers(await token_of(app, "alice"))
    assert (await create(client, headers=user)).status_code == 403
    assert (await client.delete(f"/admin/leaderboards/{BOARD}", headers=user)).status_code == 403
    assert [b.name for b in await app.service.leaderboards.all()] == [BOARD]


async def test_the_admin_deletes_a_leaderboard(app: App, client: httpx.AsyncClient):
    deleted = await client.delete(f"/admin/leaderboards/{BOARD}", headers=ADMIN)
    assert deleted.json() == {"status": "deleted", "leaderboard": BOARD}
    assert await app.service.leaderboards.all(include_closed=True) == []
    again = await client.delete(f"/admin/leaderboards/{BOARD}", headers=ADMIN)
    assert again.status_code == 404


async def test_a_submission_answers_with_its_receipt_and_its_report_whole(
    app: App, client: httpx.AsyncClient
):
    """What the CLI reads its records from: the jobs a submission queued, and each job and
    public run of its report (the RunResult whole); a secret run stays redacted."""
    token = await token_of(app, "alice")
    accepted = await client.post(
        f"/submission/{BOARD}/CPU/leaderboard",
        headers=popcorn_headers(token),
        files={"file": ("submission.py", source())},
    )
    receipt = accepted.json()["receipt"]
    assert receipt["user"] == "alice" and receipt["mode"] == "leaderboard"
    assert [(j["gpu"], j["secret"], j["state"]) for j in receipt["jobs"]] == [
        ("CPU", False, "queued"),
        ("CPU", True, "queued"),
    ]
    stored = await app.service.submissions.report(receipt["submission_id"])
    await finish_submission(app.pool, stored, 1e-6)
    view = (
        await client.get(
            f"/user/submissions/{receipt['submission_id']}", headers=popcorn_headers(token)
        )
    ).json()
    assert [j["state"] for j in view["jobs"]] == ["finished", "finished"]
    public, secret = sorted(view["runs"], key=lambda r: r["secret"])
    assert public["run_result"]["passed"] is True and public["redacted"] is False
    assert "run_result" not in secret and secret["redacted"] is True
    assert {public["job_id"], secret["job_id"]} == {j["id"] for j in receipt["jobs"]}
