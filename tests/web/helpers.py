"""Shortcuts for the page tests: ranked submissions without a runner, signing in."""

from __future__ import annotations

from datetime import timedelta

import httpx
from playwright.async_api import Page

from cluster_manager.app import App
from cluster_manager.core.models import Mode
from cluster_manager.service import SubmissionReceipt, Submitter
from tests.api.conftest import BOARD, IDENTITY
from tests.storage.helpers import finish_submission

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


async def rank(
    app: App, user: str, score: float, board: str = BOARD, gpu: str = "CPU"
) -> SubmissionReceipt:
    receipt = await app.service.submissions.submit(
        board,
        Submitter(user, user),
        "submission.py",
        (IDENTITY / "submission.py").read_bytes(),
        gpus=[gpu],
        mode=Mode.LEADERBOARD,
    )
    await finish_submission(app.pool, receipt, score)
    return receipt


async def sign_in(app: App, client: httpx.AsyncClient, user: str) -> str:
    """Signs `client` in as `user` (a new token); the token."""
    token = await app.service.accounts.issue_token(Submitter(user, user))
    answer = await client.post("/login", data={"token": token, "next": "/"})
    assert answer.status_code == 303, answer.text
    return token


async def sign_in_page(app: App, page: Page, live_url: str, user: str) -> None:
    """Signs the browser's `page` in as `user` through the sign-in form."""
    token = await app.service.accounts.issue_token(Submitter(user, user))
    await page.goto(f"{live_url}/login")
    await page.get_by_label("API token").fill(token)
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{live_url}/")


async def close(app: App, board: str = BOARD, *, ago: timedelta = timedelta(days=1)) -> None:
    """Ends the board `ago` before now (what was done before this call stays before it)."""
    await app.pool.execute(
        "UPDATE leaderboards SET deadline = now() - $2::interval WHERE name = $1", board, ago
    )
