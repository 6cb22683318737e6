"""Submitting and reading back through the API: the polling form popcorn-cli uses, a user's
history, deletion with re-ranking, and who may see what."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.core.task import load_task
from tests.api.conftest import ADMIN_TOKEN, BOARD, IDENTITY, popcorn_headers, source, token_of
from tests.support.replay import ReplayLauncher

DONE_STATES = {"succeeded", "failed", "timed_out"}


async def submit(
    client: httpx.AsyncClient,
    token: str,
    mode: str = "leaderboard",
    *,
    gpu: str = "CPU",
    name: str = "submission.py",
    data: bytes | None = None,
) -> httpx.Response:
    return await client.post(
        f"/submission/{BOARD}/{gpu}/{mode}",
        headers=popcorn_headers(token),
        files={"file": (name, source() if data is None else data)},
    )


async def wait_done(client: httpx.AsyncClient, token: str, submission_id: int) -> dict[str, Any]:
    for _ in range(1200):
        answer = await client.get(
            f"/user/submissions/{submission_id}", headers=popcorn_headers(token)
        )
        assert answer.status_code == 200, answer.text
        details = answer.json()
        if details["done"]:
            return details
        await asyncio.sleep(0.1)
    raise AssertionError(f"submission {submission_id} did not finish")


# The API's one end-to-end run on the real local launcher (runner, sandbox, harness).
@pytest.mark.real_runs
@pytest.mark.usefixtures("scheduler")
async def test_a_ranked_submission_is_accepted_run_and_reported_as_popcorn_reads_it(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    accepted = await submit(client, token)
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert body["status"] == "accepted"
    submission_id = body["details"]["id"]
    assert isinstance(submission_id, int) and isinstance(body["details"]["job_status_id"], int)
    queue = body["runner_queue"]
    assert queue["runner"] == "local" and queue["gpu"] == "CPU"
    assert isinstance(queue["queued_jobs"], int) and isinstance(queue["running_jobs"], int)

    details = await wait_done(client, token, submission_id)
    assert details["job"]["status"] == "succeeded" and details["job"]["error"] is None
    assert details["job"]["last_heartbeat"] is not None  # its scheduler renewed the lease
    assert details["leaderboard_name"] == BOARD and details["user_id"] == "alice"
    assert details["code"] == source().decode() and details["file_name"] == "submission.py"
    public = next(r for r in details["runs"] if not r["secret"])
    secret = next(r for r in details["runs"] if r["secret"])
    assert public["mode"] == "leaderboard" and public["runner"] == "CPU" and public["passed"]
    assert isinstance(public["score"], float) and public["score"] > 0
    assert public["result"]["benchmark-count"] == len(load_task(IDENTITY).benchmarks)
    assert public["result"]["check"] == "pass"
    assert float(public["result"]["benchmark.0.mean"]) > 0
    assert public["diagnostics"]["exit_code"] == 0 and public["diagnostics"]["success"]
    # The secret run shows its verdict only: nothing derived from its inputs.
    assert secret["passed"] and secret["score"] is None
    assert "result" not in secret and "diagnostics" not in secret
    ranking = (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]
    assert [(e["user"], e["submission_id"]) for e in ranking] == [("alice", submission_id)]


@pytest.mark.usefixtures("scheduler")
async def test_a_wrong_answer_is_failed_with_the_first_failure(app: App, client: httpx.AsyncClient):
    token = await token_of(app, "alice")
    wrong = (IDENTITY / "wrong" / "wrong_answer.py").read_bytes()
    accepted = await submit(client, token, "test", data=wrong)
    details = await wait_done(client, token, accepted.json()["details"]["id"])
    assert details["job"]["status"] == "failed"
    assert details["job"]["error"].startswith("CPU: test: test 0 failed")
    (run,) = details["runs"]
    assert not run["passed"] and run["result"]["test.0.status"] == "fail"
    assert run["result"]["test.0.error"]


@pytest.mark.reliability(
    "Access",
    "reading, deleting and streaming the events of another user's submission by its id",
    "404 exactly as for an id that does not exist; the admin token reads it",
)
async def test_someone_elses_submission_is_not_found_but_the_admin_sees_it(
    app: App, client: httpx.AsyncClient
):
    alice, bob = await token_of(app, "alice"), await token_of(app, "bob")
    submission_id = (await submit(client, alice, "test")).json()["details"]["id"]
    for method in ("GET", "DELETE"):
        answer = await client.request(
            method, f"/user/submissions/{submission_id}", headers=popcorn_headers(bob)
        )
        assert answer.status_code == 404
        assert answer.json() == {"detail": f"there is no submission {submission_id}"}
    admin = await client.get(
        f"/user/submissions/{submission_id}", headers=popcorn_headers(ADMIN_TOKEN)
    )
    assert admin.status_code == 200 and admin.json()["user_id"] == "alice"
    # Queued, not yet run: its place in the queue is there for the client to show.
    assert admin.json()["job"]["status"] == "pending"
    assert admin.json()["runner_queue"]["queued_jobs"] >= 1
    events = await client.get(f"/submissions/{submission_id}/events", headers=popcorn_headers(bob))
    assert events.status_code == 404


async def test_history_lists_newest_first_with_filters_and_bounds(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    ids = [(await submit(client, token, "test")).json()["details"]["id"] for _ in range(3)]
    listed = await client.get("/user/submissions?limit=2", headers=popcorn_headers(token))
    assert [s["id"] for s in listed.json()] == ids[::-1][:2]
    item = listed.json()[0]
    assert item["leaderboard_name"] == BOARD and item["done"] is False and item["runs"] == []
    filtered = await client.get(
        f"/user/submissions?leaderboard={BOARD}", headers=popcorn_headers(token)
    )
    assert len(filtered.json()) == 3
    for query, status in (("limit=101", 422), ("limit=0", 422), ("leaderboard=nope", 404)):
        answer = await client.get(f"/user/submissions?{query}", headers=popcorn_headers(token))
        assert answer.status_code == status, query


@pytest.mark.usefixtures("scheduler")
async def test_deleting_waits_for_the_run_and_then_ranks_again_without_it(
    app: App, client: httpx.AsyncClient, replay_launcher: ReplayLauncher
):
    token = await token_of(app, "alice")
    replay_launcher.hold()  # the first run is still in flight when it is deleted
    first = (await submit(client, token)).json()["details"]["id"]
    early = await client.delete(f"/user/submissions/{first}", headers=popcorn_headers(token))
    assert early.status_code == 409 and "still queued or running" in early.json()["detail"]
    replay_launcher.let_go()
    await wait_done(client, token, first)
    second = (await submit(client, token)).json()["details"]["id"]
    await wait_done(client, token, second)
    best = (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"][0]
    gone, kept = (first, second) if best["submission_id"] == first else (second, first)

    deleted = await client.delete(f"/user/submissions/{gone}", headers=popcorn_headers(token))
    assert deleted.status_code == 200 and deleted.json() == {"status": "deleted", "id": gone}
    ranking = (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]
    assert [e["submission_id"] for e in ranking] == [kept]
    again = await client.get(f"/user/submissions/{gone}", headers=popcorn_headers(token))
    assert again.status_code == 404


async def test_a_score_held_out_of_the_ranking_is_not_a_success(
    app: App, client: httpx.AsyncClient
):
    """As the ranking decides: runs that passed with a score held for review are stored, not
    ranked, and the client is told why."""
    import dataclasses

    from cluster_manager.service import Submitter
    from cluster_manager.storage import runs as run_store
    from tests.storage.helpers import OWNER, claim_submission, dispatch, run_result

    token = await token_of(app, "alice")
    receipt = await app.service.submissions.submit(
        BOARD,
        Submitter("alice", "alice"),
        "submission.py",
        source(),
        gpus=["CPU"],
        mode=Mode.LEADERBOARD,
    )
    held = "held for review: benchmark 0 took 0.001 µs, below the task's floor of 5 µs"
    for job in (await claim_submission(app.pool, receipt.submission_id)).values():
        result = dataclasses.replace(run_result(True, 1e-9), review=held)
        async with app.pool.acquire() as conn:
            job = await dispatch(app.pool, job, owner=OWNER)
            assert await run_store.record_run(conn, job=job, owner=OWNER, result=result)
    details = await wait_done(client, token, receipt.submission_id)
    assert all(r["passed"] for r in details["runs"])
    assert details["job"] == {**details["job"], "status": "failed", "error": f"CPU: {held}"}
    assert (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"] == []
