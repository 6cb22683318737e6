"""A secret re-run through the HTTP API: its author reads passed or failed, in popcorn-cli's
routes (a submission, the history) and in our live events; the admin token reads it all."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.records import JobState
from tests.api.conftest import ADMIN_TOKEN, popcorn_headers, token_of
from tests.api.test_submissions import submit
from tests.storage.helpers import SECRET_TELLS, finish_job, record_result, telling_result

TELLS_IN_JSON = (*SECRET_TELLS, "17.25", '"wrong_answer"', '"timeout"')


async def finished_pair(app: App, client: httpx.AsyncClient, token: str, passed: bool) -> int:
    """A ranked submission whose public run passed in 1 ms and whose secret re-run `passed`
    (in 3 ms) or timed out, each telling all it can."""
    submission_id = (await submit(client, token)).json()["details"]["id"]
    report = await app.service.submissions.report(submission_id)
    public, secret = sorted(report.jobs, key=lambda j: j.secret)
    assert await finish_job(app.pool, public, True, 0.001)
    assert await record_result(app.pool, secret, telling_result(passed, 0.003))
    return submission_id


@pytest.mark.reliability(
    "Access",
    "a ranked submission's secret re-run {outcome} with a message, timings and statistics; "
    "its author reads the submission, the history and the live events through the API",
    "the secret run is passed or failed, no verdict kind, score, timing, statistics or "
    "message; the admin token reads the run in full",
)
@pytest.mark.parametrize("outcome", ["passed", "failed"])
async def test_the_author_reads_only_passed_or_failed_and_the_admin_reads_all(
    app: App, client: httpx.AsyncClient, outcome: str, record_property
):
    token = await token_of(app, "alice")
    submission_id = await finished_pair(app, client, token, outcome == "passed")
    headers = popcorn_headers(token)

    mine = await client.get(f"/user/submissions/{submission_id}", headers=headers)
    assert mine.status_code == 200, mine.text
    [secret] = [r for r in mine.json()["runs"] if r["secret"]]
    record_property("observed", f"the author's secret run: {secret}")
    assert secret["verdict"] == outcome and secret["passed"] is (outcome == "passed")
    assert secret["score"] is None and "result" not in secret and "diagnostics" not in secret
    listed = await client.get("/user/submissions", headers=headers)
    async with asyncio.timeout(30):
        events = await client.get(f"/submissions/{submission_id}/events", headers=headers)
    assert events.status_code == 200 and "event: done" in events.text
    for text in (mine.text, listed.text, events.text):
        assert [tell for tell in TELLS_IN_JSON if tell in text] == []

    admin = await client.get(
        f"/user/submissions/{submission_id}", headers=popcorn_headers(ADMIN_TOKEN)
    )
    [full] = [r for r in admin.json()["runs"] if r["secret"]]
    assert full["verdict"] == ("passed" if outcome == "passed" else "timeout")
    assert full["score"] == (0.003 if outcome == "passed" else None)
    assert "seed-derived" in admin.text and full["result"]["benchmark-count"] == 1


async def test_a_secret_job_that_failed_without_a_run_shows_no_error(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    submission_id = (await submit(client, token)).json()["details"]["id"]
    secret = next(j for j in (await app.service.submissions.report(submission_id)).jobs if j.secret)
    await app.pool.execute(
        "UPDATE jobs SET state = $2, error = 'runner: seed-derived crash' WHERE id = $1",
        secret.id,
        JobState.FAILED.value,
    )
    mine = await client.get(f"/user/submissions/{submission_id}", headers=popcorn_headers(token))
    assert "seed-derived" not in mine.text
    admin = await client.get(
        f"/user/submissions/{submission_id}", headers=popcorn_headers(ADMIN_TOKEN)
    )
    assert "seed-derived crash" in admin.text
