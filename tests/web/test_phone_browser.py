"""The pages on a phone's width (390 px) in a real browser (Debian's chromium through
Playwright): the ranking reads without scrolling sideways, long names wrap, the chart is
the one drawn for that width so its labels stay legible, and verdicts are told apart by
colour as well as by word. Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from cluster_manager.app import App
from cluster_manager.core.models import Verdict
from tests.api.conftest import BOARD
from tests.web.browser import DESKTOP, PHONE, chromium, screenshot_path
from tests.web.helpers import rank, sign_in_page
from tests.web.test_outcomes import finish, submit

pytestmark = pytest.mark.timeout(240)
expect.set_options(timeout=30_000)
LONG_NAME = "a_contestant_whose_name_goes_on_and_on_without_a_single_space"

# Every table, and whatever holds one, that ends past the page's right edge, or scrolls.
SIDEWAYS = """
() => [...document.querySelectorAll("main table, main .scroll")]
  .filter(el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5
                || el.scrollWidth > el.clientWidth + 0.5)
  .map(el => el.className || el.tagName)
"""


async def chart_scale(page: Page, gpu: str) -> tuple[str, float]:
    """The chart's source, and how large its drawing shows (1 = its own size)."""
    chart = page.locator(f"#gpu-{gpu} figure.chart img")
    await chart.scroll_into_view_if_needed()
    return await chart.evaluate(
        "img => img.decode().then(() => [img.currentSrc, img.clientWidth / img.naturalWidth])"
    )


async def test_the_ranking_and_its_chart_read_on_a_phone(app: App, live_url: str):
    for user, score in (("alice", 3e-6), (LONG_NAME, 2e-6), ("carol", 4.5e-6)):
        await rank(app, user, score)
    async with chromium() as browser:
        page = await browser.new_page(viewport=PHONE)
        await page.goto(f"{live_url}/leaderboards/{BOARD}")
        await expect(page.locator("#gpu-CPU td.user")).to_have_text([LONG_NAME, "alice", "carol"])
        width = await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert width, "the page scrolls sideways"
        assert await page.evaluate(SIDEWAYS) == []
        # Rank, user and score stay; the gap moves under the score.
        row = page.locator("#gpu-CPU tbody tr").nth(1)
        await expect(row.locator("td.score")).to_contain_text("+1 µs")
        await expect(row.locator("td.gap")).to_be_hidden()
        source, scale = await chart_scale(page, "CPU")
        assert "size=narrow" in source and scale > 0.85, (source, scale)
        await page.screenshot(path=screenshot_path("leaderboard-phone-ranking"), full_page=True)

        await page.set_viewport_size(DESKTOP)
        await page.reload()
        await expect(row.locator("td.gap")).to_be_visible()
        source, scale = await chart_scale(page, "CPU")
        assert "size=narrow" not in source and scale > 0.85, (source, scale)


async def test_the_api_reference_reads_on_a_phone(live_url: str):
    async with chromium() as browser:
        page = await browser.new_page(viewport=PHONE)
        await page.goto(f"{live_url}/docs")
        await expect(page.get_by_role("heading", name="Users' endpoints")).to_be_visible()
        width = await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert width, "/docs scrolls sideways"


async def test_verdicts_have_their_colours(app: App, live_url: str):
    finished = {}
    for verdict in (Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.TIMEOUT):
        finished[verdict] = await submit(app, "alice", f"{verdict.value}.py")
        await finish(app, finished[verdict], verdict)
    async with chromium() as browser:
        page = await browser.new_page(viewport=PHONE)
        await sign_in_page(app, page, live_url, "alice")
        await page.goto(f"{live_url}/leaderboards/{BOARD}")
        colours = {}
        for verdict in finished:
            cell = page.locator("#mine tr", has_text=f"{verdict.value}.py").locator(".outcome")
            await expect(cell).to_have_text(verdict.value.replace("_", " "))
            colours[verdict] = await cell.evaluate("el => getComputedStyle(el).color")
        assert len(set(colours.values())) == 3, colours
        assert colours[Verdict.PASSED] == "rgb(23, 128, 61)"  # green; the others are not
        assert await page.evaluate(SIDEWAYS) == []
        await page.goto(f"{live_url}/submissions/{finished[Verdict.WRONG_ANSWER].submission_id}")
        overall = page.locator("#overall")
        await expect(overall).to_have_text("wrong answer")
        await expect(overall.locator("svg.mark-bad")).to_be_visible()  # drawn, not a font's
        await page.screenshot(path=screenshot_path("submission-wrong-answer"), full_page=True)
