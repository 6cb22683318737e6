"""Runs after the deadline on the pages: an ended leaderboard's page has two rankings as tabs,
the competition's (the default) and that of the runs after the deadline, and such a run's page
is marked and places it among the runs after the deadline only."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.async_api import expect

from cluster_manager.app import App
from cluster_manager.service import SubmissionReceipt
from tests.api.conftest import BOARD
from tests.web.browser import DESKTOP, PHONE, chromium, screenshot_path
from tests.web.helpers import HTML, close, rank, sign_in
from tests.web.test_phone_browser import SIDEWAYS

PAGE = f"/leaderboards/{BOARD}"
AFTER_TAB = f"{PAGE}?ranking=after-deadline"
TABS = '<nav class="tabs rankings" aria-label="Rankings">'
NOTE = "Runs made after the deadline of"
BADGE = '<span class="badge after-deadline">after the deadline</span>'


def ranked_users(html: str, gpu: str = "CPU") -> list[str]:
    """The users in the ranking table of `gpu`'s section, in order."""
    section = html.split(f'id="gpu-{gpu}"', 1)[1].split("</section>", 1)[0]
    return re.findall(r'<td class="user">(?:<a [^>]*>)?([^<]+)', section)


def current_tab(html: str) -> list[str]:
    return re.findall(r'<a href="[^"]*" aria-current="page">([^<]+)</a>', html)


@pytest.fixture
async def late(app: App) -> SubmissionReceipt:
    """Alice ranked in time at 3 µs; the board ended; Bob ranked after it at 1 µs."""
    await rank(app, "alice", 3e-6)
    await close(app)
    return await rank(app, "bob", 1e-6)


async def test_an_open_board_has_no_rankings_tabs(app: App, client: httpx.AsyncClient):
    await rank(app, "alice", 3e-6)
    for route in (PAGE, AFTER_TAB):  # the parameter is ignored before the deadline
        page = await client.get(route, headers=HTML)
        assert page.status_code == 200
        assert TABS not in page.text and NOTE not in page.text
        assert ranked_users(page.text) == ["alice"]
        assert '<figure class="chart">' in page.text


async def test_an_ended_board_shows_the_competitions_ranking_by_default(
    client: httpx.AsyncClient, late: SubmissionReceipt
):
    page = await client.get(PAGE, headers=HTML)
    assert TABS in page.text
    assert current_tab(page.text) == ["Competition"]
    assert f'<a href="{AFTER_TAB}">After the deadline</a>' in page.text
    assert ranked_users(page.text) == ["alice"]  # Bob's faster run is not the competition's
    assert NOTE not in page.text and '<figure class="chart">' in page.text


async def test_the_after_deadline_tab_ranks_the_runs_after_the_deadline_only(
    client: httpx.AsyncClient, late: SubmissionReceipt
):
    page = await client.get(AFTER_TAB, headers=HTML)
    assert page.status_code == 200
    assert current_tab(page.text) == ["After the deadline"]
    assert f'<a href="{PAGE}">Competition</a>' in page.text
    assert ranked_users(page.text) == ["bob"]
    assert f'<a href="/submissions/{late.submission_id}">bob</a>' in page.text
    assert NOTE in page.text and "never in the competition's ranking" in page.text
    # The chart is the competition's history: not shown over another ranking.
    assert '<figure class="chart">' not in page.text
    assert "No run after the deadline is ranked on CPU2 yet." in page.text


async def test_the_after_deadline_tab_says_when_nothing_is_ranked(
    app: App, client: httpx.AsyncClient
):
    await rank(app, "alice", 3e-6)
    await close(app)
    page = await client.get(AFTER_TAB, headers=HTML)
    assert ranked_users(page.text) == []
    for gpu in ("CPU", "CPU2"):
        assert f"No run after the deadline is ranked on {gpu} yet." in page.text
    assert "No ranked submissions on" not in page.text


async def test_a_run_after_the_deadline_is_marked_on_its_page(
    client: httpx.AsyncClient, late: SubmissionReceipt
):
    page = await client.get(f"/submissions/{late.submission_id}")
    assert page.status_code == 200
    assert BADGE in page.text
    assert '<span class="gpu">CPU</span>: #1 among runs after the deadline' in page.text


async def test_a_run_in_time_is_not_marked_and_ranks_in_the_competition(
    app: App, client: httpx.AsyncClient
):
    receipt = await rank(app, "alice", 3e-6)
    await close(app)
    await rank(app, "bob", 1e-6)
    page = await client.get(f"/submissions/{receipt.submission_id}")
    assert page.status_code == 200
    assert BADGE not in page.text
    pair = "3 µs (the slower of its public and secret runs)"
    assert f'<span class="gpu">CPU</span>: #1 with {pair}</li>' in page.text
    assert "among runs after the deadline" not in page.text


@pytest.mark.timeout(240)
async def test_the_after_deadline_tab_reads_on_a_desktop_and_a_phone(
    app: App, live_url: str, late: SubmissionReceipt
):
    await rank(app, "a_contestant_whose_name_goes_on_and_on_without_a_single_space", 2e-6)
    async with chromium() as browser:
        page = await browser.new_page(viewport=DESKTOP)
        await page.goto(f"{live_url}{AFTER_TAB}")
        for viewport, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
            await page.set_viewport_size(viewport)
            await page.reload()
            tab = page.get_by_role("navigation", name="Rankings").get_by_role("link")
            await expect(tab.nth(1)).to_have_attribute("aria-current", "page")
            await expect(page.locator("#gpu-CPU td.user")).to_have_count(2)
            width = await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert width, f"the after-deadline tab scrolls sideways on a {name}"
            assert await page.evaluate(SIDEWAYS) == []
            await page.screenshot(
                path=screenshot_path(f"leaderboard-after-deadline-{name}"), full_page=True
            )


async def test_the_form_stays_after_the_deadline_while_runs_after_it_are_taken(
    app: App, client: httpx.AsyncClient
):
    await close(app)
    await sign_in(app, client, "bob")
    page = await client.get(PAGE, headers=HTML)
    assert "<h3>Submit</h3>" in page.text
    assert "a ranked run ranks among the runs after the deadline only" in page.text
    await app.service.controls.set_after_deadline_runs(BOARD, False, "organiser")
    page = await client.get(PAGE, headers=HTML)
    assert "<h3>Submit</h3>" not in page.text
