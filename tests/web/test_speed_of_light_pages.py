"""The speed of light on the pages of a shipped example (vectoradd): the leaderboard states
what each case must do and its fastest time on each GPU type, and each ranked score's share
of it; a submission's page gives each case's achieved bandwidth, FLOP rate and share of peak.
In a real browser at a desktop's and a phone's width (390 px), nothing scrolls sideways.
Screenshots land in test-artifacts/screenshots/."""

from __future__ import annotations

import html
import re

import httpx
import pytest
from playwright.async_api import expect

from cluster_manager.app import App
from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.speed_of_light import floor_ns
from tests.support.speed_helpers import (
    H100,
    SPEED_BOARD,
    rank_with_figures,
    speed_board,
    speed_registry,
)
from tests.web.browser import DESKTOP, PHONE, chromium, screenshot_path
from tests.web.helpers import HTML, sign_in, sign_in_page
from tests.web.test_phone_browser import SIDEWAYS

pytestmark = pytest.mark.timeout(240)
expect.set_options(timeout=30_000)


@pytest.fixture
def api_registry() -> GpuRegistry:
    return speed_registry()


async def ranked_at_a_quarter_of_peak(app: App, user: str = "alice") -> int:
    """A ranked vectoradd submission whose every case ran at 25 % of the H100's peak."""
    task = await speed_board(app)
    means = [floor_ns(task.speed_of_light, case, H100) * 4 for case in task.benchmarks]
    return (await rank_with_figures(app, user, means)).submission_id


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


async def test_the_leaderboard_states_the_work_the_floors_and_each_scores_share(
    app: App, client: httpx.AsyncClient
):
    await ranked_at_a_quarter_of_peak(app)
    page = (await client.get(f"/leaderboards/{SPEED_BOARD}", headers=HTML)).text
    words = text_of(page)
    assert "Speed of light" in words
    assert "bytes = 3 * size * size * 2 moved to and from memory" in words
    assert "flops = size * size in fp16" in words
    # Per case: its work and its fastest time on the H100 (3 * 256² * 2 B at 3.35 TB/s).
    assert "size: 256; seed: 54352 393 kB · 65.5 kFLOP fp16 H100: 117 ns" in words
    assert "size: 1024; seed: 6256 6.29 MB · 1.05 MFLOP fp16 H100: 1.88 µs" in words
    assert "CPU: no published peaks" in words
    # The ranking's column: the score's share of the speed of light.
    ranking = page.split('id="gpu-H100"')[1].split("</table>")[0]
    assert "Of peak" in ranking and '<td class="num peak">25%</td>' in ranking


async def test_a_submissions_page_gives_each_cases_rates_and_share_of_peak(
    app: App, client: httpx.AsyncClient
):
    submission_id = await ranked_at_a_quarter_of_peak(app)
    await sign_in(app, client, "alice")
    page = (await client.get(f"/submissions/{submission_id}")).text
    table = page.split('<table class="benchmarks with-speed">')[1].split("</table>")[0]
    assert all(h in table for h in ("Bandwidth", "FLOP rate", "Of peak"))
    # 25 % of 3.35 TB/s, whatever the case.
    assert text_of(table).count("838 GB/s of peak: 25% memory") == 3
    assert table.count('<td class="num peak">25% memory</td>') == 3
    assert "GFLOP/s fp16" in table
    assert "peaks (the GPU type's published): 3.35 TB/s, fp16 989 TFLOP/s" in text_of(page)
    # The report, as the CLI and the bot print it, has the same table.
    assert "Speed of light (leaderboard phase)" in page


async def test_the_pages_read_at_a_desktops_and_a_phones_width(app: App, live_url: str):
    submission_id = await ranked_at_a_quarter_of_peak(app)
    async with chromium() as browser:
        page = await browser.new_page(viewport=DESKTOP)
        await sign_in_page(app, page, live_url, "alice")
        board_url = f"{live_url}/leaderboards/{SPEED_BOARD}"
        for width, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            await page.set_viewport_size(viewport)
            await page.goto(board_url)
            await expect(page.locator("#speed-of-light")).to_be_visible()
            floors = page.locator("table.speed-of-light .floor").first
            await expect(floors).to_have_text("H100: 117 ns")
            assert await page.evaluate(SIDEWAYS) == [], width
            await page.screenshot(
                path=screenshot_path(f"speed-of-light-leaderboard-{width}"), full_page=True
            )
            await page.goto(f"{live_url}/submissions/{submission_id}")
            row = page.locator("table.benchmarks tbody tr").first
            await expect(row.locator("td.bandwidth")).to_contain_text("838 GB/s")
            peak_cell, below = row.locator("td.peak"), row.locator("td.bandwidth .below")
            if viewport is PHONE:  # the share goes under the bandwidth; the spread is left out
                await expect(peak_cell).to_be_hidden()
                await expect(below).to_have_text("of peak: 25% memory")
                await expect(row.locator("td.spread").first).to_be_hidden()
                fits = "document.documentElement.scrollWidth <= window.innerWidth"
                assert await page.evaluate(fits), "the submission's page scrolls sideways"
            else:
                await expect(peak_cell).to_have_text("25% memory")
                await expect(below).to_be_hidden()
            await page.screenshot(
                path=screenshot_path(f"speed-of-light-submission-{width}"), full_page=True
            )
