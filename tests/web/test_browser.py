"""The pages in a real browser (Debian's chromium through Playwright) against `serve`'s app on
127.0.0.1, a real Postgres and the local launcher: tiles, a ranking and its chart, signing in
with a token, submitting from the form and watching it run live, and what stays hidden.
Screenshots of each page land in test-artifacts/screenshots/."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

import pytest
from playwright.async_api import Page, expect

from cluster_manager.app import App
from cluster_manager.core.task import load_task
from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling
from cluster_manager.service import Submitter
from tests.api.conftest import BOARD, FAST, IDENTITY
from tests.web.browser import DESKTOP, PHONE, chromium, screenshot_path
from tests.web.helpers import close, rank
from tests.web.test_outcomes import EMOJI

pytestmark = pytest.mark.timeout(240)
# Assertions wait up to 30 s, not Playwright's 5: the server runs submissions beside the pages.
expect.set_options(timeout=30_000)

# Progress lines survive the page's reload at the end of a run: the test reads them after.
RECORD_PROGRESS = """
document.addEventListener("DOMContentLoaded", () => {
  const list = document.getElementById("progress");
  if (!list) return;
  new MutationObserver(() => {
    const seen = JSON.parse(sessionStorage.getItem("progress") || "[]");
    for (const item of list.querySelectorAll("li")) {
      if (!seen.includes(item.textContent)) seen.push(item.textContent);
    }
    sessionStorage.setItem("progress", JSON.stringify(seen));
  }).observe(list, { childList: true });
});
"""


async def seed(app: App) -> dict[str, int]:
    """Three leaderboards (one closed), five users, ranked runs; alice's best submission id."""
    ids = {}
    for user, score in (("alice", 3e-6), ("bob", 2e-6), ("carol", 4.5e-6), ("dave", 9e-6)):
        ids[user] = (await rank(app, user, score)).submission_id
    await rank(app, "erin", 7e-6, gpu="CPU2")
    task = load_task(IDENTITY)
    for name, deadline in (
        ("grayscale", datetime(2099, 6, 1, tzinfo=UTC)),
        ("archive", datetime(2099, 1, 1, tzinfo=UTC)),
    ):
        await app.service.leaderboards.create(name, task, deadline, ["CPU"])
        await rank(app, "bob", 8e-6, board=name)
        await rank(app, "carol", 6e-6, board=name)
    await close(app, "archive")
    return ids


async def check_fits_a_phone(page: Page, name: str) -> None:
    await page.set_viewport_size(PHONE)
    overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{name} scrolls sideways on a phone by {overflow}px"
    await page.screenshot(path=screenshot_path(f"{name}-phone"), full_page=True)
    await page.set_viewport_size(DESKTOP)


async def test_tiles_a_ranking_and_its_chart(app: App, live_url: str):
    await seed(app)
    async with chromium() as browser:
        page = await browser.new_page(viewport=DESKTOP)
        await page.goto(live_url + "/")
        open_tiles = page.locator("ul.tiles:not(.ended) > li.tile")
        await expect(open_tiles).to_have_count(2)
        await expect(page.locator("ul.tiles.ended > li.tile h3")).to_have_text(["archive"])
        leaders = open_tiles.filter(has_text=BOARD).locator("section.gpu").first.locator(".user")
        await expect(leaders).to_have_text(["bob", "alice", "carol"])
        await page.screenshot(path=screenshot_path("home"), full_page=True)
        await check_fits_a_phone(page, "home")

        # To the leaderboard with the keyboard: focus its link, press Enter.
        await page.get_by_role("link", name=BOARD, exact=True).focus()
        await page.keyboard.press("Enter")
        await page.wait_for_url(f"**/leaderboards/{BOARD}")
        ranking = page.locator("#gpu-CPU tbody").first.locator("td.user")
        await expect(ranking).to_have_text(["bob", "alice", "carol", "dave"])
        chart = page.locator("#gpu-CPU figure.chart img")
        await chart.scroll_into_view_if_needed()
        await expect(chart).to_have_attribute("alt", re.compile("records table"))
        width = await chart.evaluate("img => img.decode().then(() => img.naturalWidth, () => 0)")
        assert width > 100, "the chart did not load"
        svg = await page.request.get(await chart.evaluate("img => img.src"))
        assert svg.ok and b"bob" in await svg.body()
        await page.locator("#gpu-CPU summary").click()  # the chart's data as a table
        records = page.locator("#gpu-CPU details tbody tr")
        await expect(records).to_have_count(2)  # alice's 3 µs, then bob's 2 µs
        await expect(page.locator("#gpu-CPU2 td.user")).to_have_text(["erin"])
        await page.screenshot(path=screenshot_path("leaderboard"), full_page=True)
        await check_fits_a_phone(page, "leaderboard")


# The web's one end-to-end run on the real local launcher (runner, sandbox, harness).
@pytest.mark.real_runs
async def test_sign_in_submit_from_the_form_and_watch_it_run(app: App, live_url: str):
    await seed(app)  # before the scheduler starts: these runs are finished by hand
    token = await app.service.accounts.issue_token(Submitter("frank", "Frank"))
    stop = asyncio.Event()
    scheduling = asyncio.create_task(keep_scheduling(app.scheduler, stop, FAST))
    try:
        await submit_and_watch(live_url, token)
    finally:
        await stop_scheduling(scheduling, stop)


async def submit_and_watch(live_url: str, token: str) -> None:
    async with chromium() as browser:
        page = await browser.new_page(viewport=DESKTOP)
        await page.add_init_script(RECORD_PROGRESS)
        await page.goto(f"{live_url}/leaderboards/{BOARD}")
        await page.get_by_role("link", name="Sign in").first.click()
        await page.screenshot(path=screenshot_path("login"), full_page=True)
        await page.get_by_label("API token").fill(token)
        await page.keyboard.press("Enter")
        await page.wait_for_url(f"**/leaderboards/{BOARD}")
        await expect(page.locator("header .who")).to_have_text("Frank")
        cookie = next(c for c in await page.context.cookies() if c["name"] == "cm_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] != token

        await page.get_by_label("Kernel file").set_input_files(str(IDENTITY / "submission.py"))
        await page.get_by_label("GPU", exact=True).select_option("CPU")
        await expect(page.get_by_label("Mode")).to_have_value("test")  # ranked only when chosen
        await page.get_by_label("Mode").select_option("leaderboard")
        await page.get_by_role("button", name="Submit").click()
        await page.wait_for_url("**/submissions/*")
        await expect(page.get_by_role("heading", name="Report")).to_be_visible(timeout=180_000)
        progress = await page.evaluate("JSON.parse(sessionStorage.getItem('progress') || '[]')")
        assert any("running" in line for line in progress), progress
        assert any(line.startswith("[CPU] passed") for line in progress), progress
        assert not any(EMOJI.search(line) for line in progress), progress  # marks are SVG
        await expect(page.locator("#overall")).to_have_text("passed")
        await expect(page.locator("pre.report")).to_contain_text("secret re-run: passed")
        await expect(page.locator("section h3").first).to_contain_text("passed")
        await page.screenshot(path=screenshot_path("submission"), full_page=True)
        await check_fits_a_phone(page, "submission")

        await page.goto(f"{live_url}/leaderboards/{BOARD}")
        mine = page.locator("#mine tbody tr")
        await expect(mine).to_have_count(1)
        await expect(mine.locator("td").last).to_have_text("passed")
        await expect(page.locator("#gpu-CPU td.user", has_text="frank")).to_have_count(1)


async def test_other_users_submissions_and_code_before_the_deadline_stay_hidden(
    app: App, live_url: str
):
    ids = await seed(app)
    token = await app.service.accounts.issue_token(Submitter("bob", "Bob"))
    async with chromium() as browser:
        page = await browser.new_page(viewport=DESKTOP)
        await page.goto(f"{live_url}/leaderboards/{BOARD}")
        await expect(page.locator("#gpu-CPU td.user a")).to_have_count(0)  # no code links
        await page.goto(f"{live_url}/submissions/{ids['alice']}")
        await page.wait_for_url(re.compile(r"/login\?next="))  # signed out: sign in first
        await page.get_by_label("API token").fill(token)
        await page.get_by_role("button", name="Sign in").click()
        await page.wait_for_url(f"**/submissions/{ids['alice']}")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
        await expect(page.locator("body")).not_to_contain_text("custom_kernel")
        await page.screenshot(path=screenshot_path("refused"), full_page=True)

        await close(app)
        await page.goto(f"{live_url}/leaderboards/{BOARD}")
        await page.locator("#gpu-CPU td.user a", has_text="alice").click()
        await page.wait_for_url(f"**/submissions/{ids['alice']}")
        await expect(page.locator("pre.code")).to_contain_text("custom_kernel")
        await page.screenshot(path=screenshot_path("closed-code"), full_page=True)
