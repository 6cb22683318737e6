"""The leaderboards' tiles and the ranking charts, served with the API over the same service."""

from __future__ import annotations

import html
import re
import time
from datetime import UTC, datetime
from xml.etree import ElementTree

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.task import load_task
from cluster_manager.rendering.charts import FASTEST_ID, PLOT_AREA_ID
from tests.api.conftest import BOARD, IDENTITY
from tests.web.helpers import HTML, rank


async def test_home_shows_open_tiles_with_their_leaders_and_ended_ones_below(
    app: App, client: httpx.AsyncClient
):
    for user, score in (("alice", 3e-6), ("bob", 2e-6), ("carol", 4e-6), ("dave", 9e-6)):
        await rank(app, user, score)
    await app.service.leaderboards.create(
        "archive", load_task(IDENTITY), datetime(2099, 1, 1, tzinfo=UTC), ["CPU"]
    )
    await app.pool.execute(
        "UPDATE leaderboards SET deadline = now() - interval '1 day' WHERE name = 'archive'"
    )
    page = await client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    open_part, ended_part = text.split("<h2>Ended</h2>")
    assert f'href="/leaderboards/{BOARD}"' in open_part and "archive" in ended_part
    # The top three on CPU, fastest first; the fourth is not on the tile.
    users = [html.unescape(u) for u in open_part.split('<span class="user">')[1:]]
    assert [u.split("<")[0] for u in users] == ["bob", "alice", "carol"]
    assert "2 µs" in open_part and "dave" not in open_part
    assert "no ranked submissions yet" in open_part  # CPU2 has none
    assert "Identity" in open_part  # the description's first line
    css = await client.get("/static/style.css")
    assert css.status_code == 200 and ".tile" in css.text


async def test_an_empty_home_says_so(api, app: App, client: httpx.AsyncClient):
    await app.pool.execute("DELETE FROM leaderboards")
    assert "No open leaderboard right now." in (await client.get("/")).text


async def test_a_chart_is_svg_and_drawn_once_per_history(app: App, api, client: httpx.AsyncClient):
    await rank(app, "alice", 3e-6)
    first = await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg")
    assert first.status_code == 200 and first.headers["content-type"] == "image/svg+xml"
    assert "<svg" in first.text and "alice" in first.text
    await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg")
    assert api.state.charts.drawn == 1
    await rank(app, "bob", 1e-6)
    assert "bob" in (await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg")).text
    assert api.state.charts.drawn == 2
    other = await client.get(f"/leaderboards/{BOARD}/chart/H100.svg")
    assert other.status_code == 400 and "does not run on &#39;H100&#39;" in other.text


async def test_a_browser_gets_the_leaderboard_page_and_a_client_the_json(
    app: App, client: httpx.AsyncClient
):
    for user, score in (("alice", 3e-6), ("bob", 2e-6), ("carol", 2e-6), ("dave", 4e-6)):
        await rank(app, user, score)
    page = await client.get(f"/leaderboards/{BOARD}", headers=HTML)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert (
        "Accept" in page.headers["vary"]
        and "default-src 'none'" in page.headers["content-security-policy"]
    )
    cpu = page.text.split('id="gpu-CPU"')[1].split("</section>")[0]
    users = [u.split("<")[0] for u in cpu.split('<td class="user">')[1:]]
    assert users == ["bob", "carol", "alice", "dave"]  # equal scores: the earlier first
    gaps = [g.split("<")[0] for g in cpu.split('<td class="num gap">')[1:]]
    assert gaps == ["", "tie", "+1 µs (+50.0%)", "+1 µs (+33.3%)"]
    assert f'src="/leaderboards/{BOARD}/chart/CPU.svg"' in cpu
    records = cpu.split("<details>")[1]
    assert records.count("<tr>") == 1 + 2  # header, then alice's 3 µs and bob's 2 µs
    assert "No ranked submissions on CPU2 yet." in page.text
    assert "Identity" in page.text and "Python template" in page.text  # task, downloads
    assert "Sign in</a> to submit" in page.text and "My submissions" not in page.text
    for accept in ("*/*", "application/json", "text/html;q=0.5, application/json"):
        data = await client.get(f"/leaderboards/{BOARD}", headers={"Accept": accept})
        assert data.json()["rankings"]["CPU"][0]["user"] == "bob", accept


async def test_an_unknown_leaderboard_is_a_404_page(client: httpx.AsyncClient):
    page = await client.get("/leaderboards/nope", headers=HTML)
    assert page.status_code == 404 and "<h1>Not found</h1>" in page.text
    assert "there is no leaderboard" in page.text


async def test_task_files_download_and_unknown_ones_are_404(app: App, client: httpx.AsyncClient):
    files = await app.service.leaderboards.task_files(BOARD)
    name = sorted(files)[0]
    got = await client.get(f"/leaderboards/{BOARD}/files/{name}")
    assert got.status_code == 200 and got.text == files[name]
    assert got.headers["content-disposition"].startswith("attachment; filename=")
    assert (await client.get(f"/leaderboards/{BOARD}/files/nope.py")).status_code == 404
    assert (await client.get(f"/leaderboards/{BOARD}/files/submission.py")).status_code == 404


@pytest.mark.reliability(
    "Access",
    "a user named <script>…</script> and a file named <img onerror=…> on the ranking and "
    "submission pages",
    "shown as text (escaped), and the pages' CSP allows no inline script anyway",
)
async def test_hostile_names_are_shown_as_text(app: App, client: httpx.AsyncClient):
    hostile = "<script>alert(1)</script>"
    await rank(app, hostile, 2e-6)
    page = await client.get(f"/leaderboards/{BOARD}", headers=HTML)
    assert hostile not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    tile = (await client.get("/")).text
    assert hostile not in tile and "&lt;script&gt;" in tile


def x_extent(svg: str, element_id: str) -> tuple[float, float]:
    """The leftmost and rightmost x of the paths in the SVG element with this id."""
    group = ElementTree.fromstring(svg).find(f".//*[@id='{element_id}']")
    assert group is not None, element_id
    xs = [
        float(x)
        for path in group.iter("{http://www.w3.org/2000/svg}path")
        for x in re.findall(r"[ML]\s*(-?[\d.]+)", path.get("d", ""))
    ]
    return min(xs), max(xs)


@pytest.mark.parametrize("span_s", [600, 4], ids=["ten-minutes", "a-few-seconds"])
@pytest.mark.parametrize("size", ["wide", "narrow"])
async def test_a_chart_spans_its_results_and_ends_by_now(
    app: App, client: httpx.AsyncClient, span_s: int, size: str
):
    """The results fill the time axis, which ends at the newest (just now): no hour around
    them, no room in the future. Ten minutes of data were a vertical line in an hour, and a
    few seconds of it were still one in five minutes."""
    for user, score in (("alice", 3e-6), ("bob", 2e-6), ("carol", 1e-6)):
        await rank(app, user, score)
    # The three improvements spread evenly over `span_s` seconds, the last one now.
    started = time.monotonic()
    await app.pool.execute(
        """
        UPDATE ranking_events e SET ranked_at = now() - make_interval(secs => $1 * (2 - o.n) / 2.0)
        FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM ranking_events) o
        WHERE o.id = e.id
        """,
        span_s,
    )
    svg = (await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg?size={size}")).text
    since_newest = time.monotonic() - started  # at least the time from the newest to now
    left, right = x_extent(svg, PLOT_AREA_ID)
    first, last = x_extent(svg, FASTEST_ID)  # from the first result to the newest
    assert (last - first) / (right - left) > 0.85, "the results are squeezed into a corner"
    after_newest_s = (right - last) / (last - first) * span_s
    assert after_newest_s <= since_newest + 0.01, f"the axis runs {after_newest_s:.1f} s past now"


async def test_the_narrow_chart_is_drawn_for_a_phone(app: App, client: httpx.AsyncClient):
    await rank(app, "alice", 3e-6)
    wide = (await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg")).text
    narrow = (await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg?size=narrow")).text
    width = {
        name: float(ElementTree.fromstring(svg).get("width", "0").removesuffix("pt"))
        for name, svg in (("wide", wide), ("narrow", narrow))
    }
    assert width["narrow"] * 96 / 72 <= 400 < width["wide"] * 96 / 72  # in CSS px: a phone's
    assert "alice" in narrow and "Best score over time" in narrow
    bad = await client.get(f"/leaderboards/{BOARD}/chart/CPU.svg?size=huge", headers=HTML)
    assert bad.status_code == 404
