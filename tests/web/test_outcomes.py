"""What a submission's pages say about it: a job's real state (queued with its place in line,
starting, running) and, once it has ended, its verdict in the words and colour of that
outcome, with a drawn tick or cross, never an emoji that shows as a box without an emoji
font."""

from __future__ import annotations

import re

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.models import Mode, Verdict
from cluster_manager.service import SubmissionReceipt, Submitter
from tests.api.conftest import BOARD, source
from tests.storage.helpers import claim_submission, dispatch, record
from tests.web.helpers import HTML, sign_in

EMOJI = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff]")


async def submit(app: App, user: str, file_name: str = "submission.py") -> SubmissionReceipt:
    return await app.service.submissions.submit(
        BOARD, Submitter(user, user), file_name, source(), gpus=["CPU"], mode=Mode.LEADERBOARD
    )


async def finish(app: App, receipt: SubmissionReceipt, verdict: Verdict) -> None:
    """Runs both of its jobs to `verdict` (the secret one too)."""
    passed = verdict is Verdict.PASSED
    for job in (await claim_submission(app.pool, receipt.submission_id)).values():
        await record(app.pool, await dispatch(app.pool, job), passed, 1e-6, verdict=verdict)


def outcome_of(html: str, where: str) -> tuple[str, str]:
    """The (class, words) of the first outcome badge after `where` in the page."""
    found = re.search(
        r'<span class="outcome is-([a-z_]+)"[^>]*>(?:<svg.*?</svg>)?<span class="word">([^<]*)<',
        html[html.index(where) :],
    )
    assert found, f"no outcome after {where!r}"
    return found[1], found[2]


@pytest.mark.parametrize(
    ("verdict", "words"),
    [
        (Verdict.WRONG_ANSWER, "wrong answer"),
        (Verdict.RUNTIME_ERROR, "runtime error"),
        (Verdict.TIMEOUT, "timeout"),
        (Verdict.PASSED, "passed"),
    ],
)
async def test_a_finished_job_shows_its_verdict_in_its_colour(
    app: App, client: httpx.AsyncClient, verdict: Verdict, words: str
):
    receipt = await submit(app, "alice")
    await finish(app, receipt, verdict)
    await sign_in(app, client, "alice")
    page = (await client.get(f"/submissions/{receipt.submission_id}")).text
    assert outcome_of(page, 'id="status"') == (verdict.value, words)  # the heading
    assert outcome_of(page, "data-job=") == (verdict.value, words)  # the public CPU job
    assert outcome_of(page, "<h2>Runs</h2>") == (verdict.value, words)
    assert "finished" not in page and "Status: <span" in page
    board = (await client.get(f"/leaderboards/{BOARD}", headers=HTML)).text
    assert outcome_of(board, 'id="mine"') == (verdict.value, words)  # not "failed"
    css = (await client.get("/static/style.css")).text
    assert f".is-{verdict.value}" in css  # a colour of its own


async def test_marks_are_drawn_not_emoji(app: App, client: httpx.AsyncClient):
    failed, passed = await submit(app, "alice", "a.py"), await submit(app, "alice", "b.py")
    await finish(app, failed, Verdict.WRONG_ANSWER)
    await finish(app, passed, Verdict.PASSED)
    await sign_in(app, client, "alice")
    for receipt, kind in ((failed, "bad"), (passed, "ok")):
        page = (await client.get(f"/submissions/{receipt.submission_id}")).text
        assert not EMOJI.search(page), EMOJI.findall(page)
        report = page.split('<pre class="report">')[1].split("</pre>")[0]
        assert f'<svg class="mark mark-{kind}"' in report  # the report's ✅/❌ as marks
    board = (await client.get(f"/leaderboards/{BOARD}", headers=HTML)).text
    assert not EMOJI.search(board) and '<svg class="mark mark-ok"' in board
    script = (await client.get("/static/live.js")).text
    assert not EMOJI.search(script), EMOJI.findall(script)


async def test_a_queued_submission_says_queued_and_its_place_in_line(
    app: App, client: httpx.AsyncClient
):
    await submit(app, "bob")  # ahead in the line: its public and secret jobs
    receipt = await submit(app, "alice")
    await sign_in(app, client, "alice")
    page = (await client.get(f"/submissions/{receipt.submission_id}")).text
    assert outcome_of(page, 'id="status"') == ("queued", "queued")
    assert "running" not in page
    jobs = page.split('<ul class="jobs">')[1].split("</ul>")[0]
    assert re.findall(r'<span class="detail">([^<]*)</span>', jobs) == ["#3 in line", "#4 in line"]
    assert 'data-events="' in page  # and followed live from here
    board = (await client.get(f"/leaderboards/{BOARD}", headers=HTML)).text
    assert outcome_of(board, 'id="mine"') == ("queued", "queued")

    await claim_submission(app.pool, receipt.submission_id)  # a worker takes it
    page = (await client.get(f"/submissions/{receipt.submission_id}")).text
    assert outcome_of(page, 'id="status"') == ("running", "running")
    assert outcome_of(page, "data-job=") == ("starting", "starting")
    assert "in line" not in page
    board = (await client.get(f"/leaderboards/{BOARD}", headers=HTML)).text
    assert outcome_of(board, 'id="mine"') == ("running", "running")
