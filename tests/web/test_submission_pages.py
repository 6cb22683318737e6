"""A submission's page: its owner's and an admin's; everyone's for a ranked one after the
deadline, never before; and the submit form, under the same rules as every front end."""

from __future__ import annotations

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.service import Submitter
from tests.api.conftest import ADMIN_TOKEN, BOARD, source
from tests.web.helpers import HTML, close, rank, sign_in


async def test_the_owner_reads_the_report_runs_and_code(app: App, client: httpx.AsyncClient):
    receipt = await rank(app, "alice", 2e-6)
    await sign_in(app, client, "alice")
    page = await client.get(f"/submissions/{receipt.submission_id}")
    assert page.status_code == 200
    assert "<h2>Report</h2>" in page.text and "<h2>Runs</h2>" in page.text
    assert "secret re-run: passed" in page.text  # the report as the CLI prints it
    # Its rank's score is the pair's slower run, said so (the public run's may be faster).
    assert "#1 with 2 µs (the slower of its public and secret runs)" in page.text
    assert "def custom_kernel" in page.text  # the code, escaped
    assert "data-events" not in page.text  # done: nothing to follow
    assert page.headers["cache-control"] == "no-store"  # private: no cache keeps a copy
    board = await client.get(f"/leaderboards/{BOARD}", headers=HTML)  # lists hers too
    assert "My submissions" in board.text and board.headers["cache-control"] == "no-store"
    client.cookies.clear()
    assert "cache-control" not in (await client.get(f"/leaderboards/{BOARD}", headers=HTML)).headers


@pytest.mark.reliability(
    "Access",
    "opening another user's submission page, signed out and signed in as someone else, "
    "before the deadline",
    "a sign-in redirect, then 404 as for an unknown id; the code is never shown",
)
async def test_someone_else_cannot_read_it_before_the_deadline(app: App, client: httpx.AsyncClient):
    receipt = await rank(app, "alice", 2e-6)
    signed_out = await client.get(f"/submissions/{receipt.submission_id}")
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login")
    await sign_in(app, client, "bob")
    page = await client.get(f"/submissions/{receipt.submission_id}")
    assert page.status_code == 404 and "custom_kernel" not in page.text
    # Same answer as for an id that does not exist: ids cannot be probed.
    assert "there is no submission" in page.text


@pytest.mark.reliability(
    "Access",
    "reading code from the web after the deadline: a ranked submission and one the ranking "
    "does not hold",
    "the ranked one is open to all; the other stays its author's",
)
async def test_after_the_deadline_ranked_code_is_open_and_the_rest_is_not(
    app: App, client: httpx.AsyncClient
):
    ranked = await rank(app, "alice", 2e-6)
    slower = await rank(app, "alice", 5e-6)  # not her best: not in the ranking
    await close(app)
    page = await client.get(f"/submissions/{ranked.submission_id}")  # signed out
    assert page.status_code == 200 and "def custom_kernel" in page.text
    assert "<h2>Report</h2>" not in page.text  # the code and scores; the log stays hers
    hidden = await client.get(f"/submissions/{slower.submission_id}")
    assert hidden.status_code == 303  # signed out: sign in to see your own
    board = await client.get(f"/leaderboards/{BOARD}", headers={"Accept": "text/html"})
    assert f'href="/submissions/{ranked.submission_id}"' in board.text


async def test_an_admin_reads_any_submission(app: App, client: httpx.AsyncClient):
    receipt = await rank(app, "alice", 2e-6)
    await client.post("/login", data={"token": ADMIN_TOKEN})
    page = await client.get(f"/submissions/{receipt.submission_id}")
    assert page.status_code == 200 and "<h2>Report</h2>" in page.text


async def test_the_form_submits_as_the_signed_in_user(app: App, client: httpx.AsyncClient):
    await sign_in(app, client, "alice")
    answer = await client.post(
        f"/leaderboards/{BOARD}/submit",
        files={"file": ("submission.py", source())},
        data={"gpu": "CPU2", "mode": "test"},
    )
    assert answer.status_code == 303
    submission_id = int(answer.headers["location"].rsplit("/", 1)[1])
    row = await app.pool.fetchrow(
        "SELECT u.external_id, s.mode FROM submissions s JOIN users u ON u.id = s.user_id"
        " WHERE s.id = $1",
        submission_id,
    )
    assert (row["external_id"], row["mode"]) == ("alice", "test")
    assert await app.pool.fetchval(
        "SELECT array_agg(DISTINCT gpu) FROM jobs WHERE submission_id = $1", submission_id
    ) == ["CPU2"]
    page = await client.get(answer.headers["location"])
    assert f'data-events="/submissions/{submission_id}/events"' in page.text  # queued: live


async def test_the_form_makes_a_test_run_unless_ranked_is_chosen(
    app: App, client: httpx.AsyncClient
):
    """Trying a file must not rank it: the form starts on test, and a form that names no mode
    makes a test run."""
    await sign_in(app, client, "alice")
    board = await client.get(f"/leaderboards/{BOARD}", headers=HTML)
    assert "<option selected>test</option>" in board.text
    assert "<option selected>leaderboard</option>" not in board.text
    answer = await client.post(
        f"/leaderboards/{BOARD}/submit",
        files={"file": ("submission.py", source())},
        data={"gpu": "CPU"},
    )
    assert answer.status_code == 303
    assert await app.pool.fetchval("SELECT array_agg(mode::text) FROM jobs") == ["test"]


@pytest.mark.reliability(
    "Bad input",
    "submitting from the web form signed out, for a GPU the leaderboard does not run on, "
    "and after its deadline",
    "a sign-in redirect, 400 and 403 pages saying why; nothing stored",
)
async def test_the_form_refuses_what_the_service_refuses(app: App, client: httpx.AsyncClient):
    form = {"files": {"file": ("submission.py", source())}, "data": {"gpu": "H100"}}
    signed_out = await client.post(f"/leaderboards/{BOARD}/submit", **form)
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login")
    await sign_in(app, client, "alice")
    wrong_gpu = await client.post(f"/leaderboards/{BOARD}/submit", **form)
    assert wrong_gpu.status_code == 400 and "H100" in wrong_gpu.text
    await close(app)
    # Runs after the deadline are taken by default: refused once the organisers turn them off.
    await app.service.controls.set_after_deadline_runs(BOARD, False, "org")
    late = await client.post(
        f"/leaderboards/{BOARD}/submit", files=form["files"], data={"gpu": "CPU"}
    )
    assert late.status_code == 403 and "deadline" in late.text
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0


async def test_the_admin_cannot_submit_from_the_form(app: App, client: httpx.AsyncClient):
    await client.post("/login", data={"token": ADMIN_TOKEN})
    answer = await client.post(
        f"/leaderboards/{BOARD}/submit", files={"file": ("submission.py", source())}
    )
    assert answer.status_code == 403 and "acts for no user" in answer.text


@pytest.mark.reliability(
    "Access",
    "a banned user submitting from the web page's form, and anyone while the leaderboard is paused",
    "403 and 503 pages with the ban's and the pause's reasons; nothing stored",
)
async def test_the_form_refuses_a_banned_user_and_a_paused_board(
    app: App, client: httpx.AsyncClient
):
    await sign_in(app, client, "alice")
    form = {"files": {"file": ("submission.py", source())}, "data": {"gpu": "CPU"}}
    await app.service.controls.ban(Submitter("alice", "alice"), "generated spam", "org")
    banned = await client.post(f"/leaderboards/{BOARD}/submit", **form)
    assert banned.status_code == 403 and "generated spam" in banned.text
    await app.service.controls.unban("alice")
    await app.service.controls.pause(BOARD, "reference being fixed", "org")
    paused = await client.post(f"/leaderboards/{BOARD}/submit", **form)
    assert paused.status_code == 503 and "reference being fixed" in paused.text
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0
