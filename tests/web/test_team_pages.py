"""Teams on the leaderboard page: a team ranks as one entry under its name, beside the member
whose submission it is; the Teams section counts the teams and shows the viewer's, and the
teams page lists every team with its members; a signed-in user creates, invites, joins and
leaves through the section's forms, under the submit form's rules."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from playwright.async_api import Page, expect

from cluster_manager.app import App
from cluster_manager.core.teams import Team
from cluster_manager.service import Submitter
from tests.api.conftest import ADMIN_TOKEN, BOARD
from tests.web.browser import DESKTOP, PHONE, chromium, screenshot_path
from tests.web.helpers import HTML, close, rank, sign_in, sign_in_page
from tests.web.test_after_deadline_pages import AFTER_TAB
from tests.web.test_phone_browser import SIDEWAYS

PAGE = f"/leaderboards/{BOARD}"
TEAMS_PAGE = f"{PAGE}/teams"
ALICE, BOB, CAROL = (Submitter(u, u) for u in ("alice", "bob", "carol"))
FAST_ONES = '<span class="team">Fast Ones</span> <span class="member">{}</span>'
TEAM_FORMS = ("/team/create", "/team/join", "/team/invite", "/team/leave")
INVITE = re.compile(r'<code class="code">([^<]+)</code>')


async def team_of_two(app: App, name: str = "Fast Ones") -> Team:
    """Alice's team with Bob in it."""
    await app.service.teams.create(BOARD, name, ALICE)
    return await app.service.teams.join(await app.service.teams.invite(BOARD, ALICE), BOB)


def section(html: str, anchor: str) -> str:
    return html.split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]


def ranked_cells(html: str, gpu: str = "CPU") -> list[str]:
    """The user cells of `gpu`'s ranking, their links left out."""
    cells = re.findall(r'<td class="user">(.*?)</td>', section(html, f"gpu-{gpu}"))
    return [re.sub(r"</?a[^>]*>", "", cell) for cell in cells]


def team_lines(html: str) -> list[str]:
    """The teams page's entries as text: name, size, members."""
    items = re.findall(r"<li[^>]*>(.*?)</li>", section(html, "teams"), re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", item).split()) for item in items]


async def team_count(app: App) -> int:
    return await app.pool.fetchval("SELECT count(*) FROM teams")


async def page(client: httpx.AsyncClient, route: str = PAGE) -> str:
    answer = await client.get(route, headers=HTML)
    assert answer.status_code == 200, answer.text
    return answer.text


async def post(client: httpx.AsyncClient, form: str, **data: str) -> httpx.Response:
    return await client.post(f"{PAGE}/team/{form}", data=data)


async def test_a_team_ranks_as_one_entry_under_its_name(app: App, client: httpx.AsyncClient):
    await team_of_two(app)
    await rank(app, "alice", 3e-6)
    await rank(app, "bob", 2e-6)
    await rank(app, "carol", 2.5e-6)
    assert ranked_cells(await page(client)) == [FAST_ONES.format("bob"), "carol"]


async def test_both_tabs_of_an_ended_board_show_the_team(app: App, client: httpx.AsyncClient):
    await team_of_two(app)
    await rank(app, "bob", 2e-6)
    await close(app, ago=timedelta(0))  # the team was made before the deadline
    await rank(app, "alice", 1e-6)  # after the deadline: that ranking's only
    competition = await page(client)
    assert ranked_cells(competition) == [FAST_ONES.format("bob")]
    assert ranked_cells(await page(client, AFTER_TAB)) == [FAST_ONES.format("alice")]
    assert "as they were at its deadline" in section(competition, "teams")

    # Bob leaves after the deadline: the competition's ranking keeps the team he was in then.
    await app.service.teams.leave(BOARD, BOB)
    await rank(app, "bob", 0.5e-6)
    assert ranked_cells(await page(client)) == [FAST_ONES.format("bob")]
    assert ranked_cells(await page(client, AFTER_TAB)) == ["bob", FAST_ONES.format("alice")]


async def test_the_section_counts_teams_and_their_page_lists_them(
    app: App, client: httpx.AsyncClient
):
    assert "No teams yet." in section(await page(client), "teams")
    assert "No teams yet." in section(await page(client, TEAMS_PAGE), "teams")
    await team_of_two(app)
    await app.service.teams.create(BOARD, "Solo", CAROL)
    html = await page(client)
    teams = section(html, "teams")
    assert f'<a href="{TEAMS_PAGE}">2 teams</a>' in teams
    assert "alice" not in teams  # members are on the teams page only
    assert html.index('id="gpu-CPU2"') < html.index('id="teams"') < html.index('id="task"')
    assert team_lines(await page(client, TEAMS_PAGE)) == [
        "Fast Ones 2 of 4 members alice, bob",
        "Solo 1 of 4 members carol",
    ]


async def test_a_member_sees_their_team_in_the_section(app: App, client: httpx.AsyncClient):
    await team_of_two(app)
    await sign_in(app, client, "bob")
    teams = section(await page(client), "teams")
    assert "You are in" in teams and "(2 of 4 members): " in teams and "alice, bob" in teams
    listed = await page(client, TEAMS_PAGE)
    assert '<li class="mine"><span class="team">Fast Ones</span>' in listed


async def test_signed_out_users_see_no_forms_and_cannot_post(app: App, client: httpx.AsyncClient):
    await team_of_two(app)
    teams = section(await page(client), "teams")
    assert "<form" not in teams and "1 team</a>" in teams
    answer = await post(client, "create", name="Mine")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/login?next=/leaderboards/{BOARD}"
    assert await team_count(app) == 1


async def test_create_invite_join_and_leave_through_the_forms(app: App, client: httpx.AsyncClient):
    await sign_in(app, client, "alice")
    teams = section(await page(client), "teams")
    assert all(f"{PAGE}{form}" in teams for form in ("/team/create", "/team/join"))
    created = await post(client, "create", name="Fast Ones")
    assert created.status_code == 303 and created.headers["location"] == f"{PAGE}#teams"
    teams = section(await page(client), "teams")
    assert "You are in" in teams and "/team/create" not in teams and "/team/leave" in teams

    invited = await post(client, "invite")
    assert invited.status_code == 200 and "a team-mate joins with this code" in invited.text
    assert invited.headers["cache-control"] == "no-store"  # a one-time code: never cached
    code = INVITE.findall(invited.text)
    assert len(code) == 1
    assert not INVITE.search(await page(client))  # shown once, after the post only

    await sign_in(app, client, "bob")
    joined = await post(client, "join", code=code[0])
    assert joined.status_code == 303 and joined.headers["location"] == f"{PAGE}#teams"
    assert team_lines(await page(client, TEAMS_PAGE)) == ["Fast Ones 2 of 4 members alice, bob"]

    left = await post(client, "leave")
    assert left.status_code == 303
    assert team_lines(await page(client, TEAMS_PAGE)) == ["Fast Ones 1 of 4 members alice"]
    assert await app.service.teams.of_user(BOARD, BOB) is None


@pytest.mark.reliability(
    "Bad input",
    "the team forms: a second team, a bad name, joining a full team or with a used code",
    "a 4xx page saying why; no team or member changes",
)
async def test_refusals_say_why_and_change_nothing(app: App, client: httpx.AsyncClient):
    await team_of_two(app)
    code = await app.service.teams.invite(BOARD, ALICE)
    await sign_in(app, client, "alice")
    second = await post(client, "create", name="Another")
    assert 400 <= second.status_code < 500 and "leave it first" in second.text

    await sign_in(app, client, "carol")
    bad = await post(client, "create", name="no/slashes")
    assert 400 <= bad.status_code < 500 and "may only hold" in bad.text
    await app.service.teams.set_rules(BOARD, size=2)
    full = await post(client, "join", code=code)
    assert 400 <= full.status_code < 500 and "as many as" in full.text
    used = await post(client, "join", code="team_nothing")
    assert 400 <= used.status_code < 500 and "unknown or was used" in used.text

    assert await team_count(app) == 1
    assert team_lines(await page(client, TEAMS_PAGE)) == ["Fast Ones 2 of 2 members alice, bob"]


async def test_leaving_or_inviting_without_a_team_is_refused(app: App, client: httpx.AsyncClient):
    await sign_in(app, client, "carol")
    left = await post(client, "leave")
    assert left.status_code == 404 and "in no team" in left.text
    invited = await post(client, "invite")
    assert 400 <= invited.status_code < 500 and "create one or join one" in invited.text


@pytest.mark.reliability(
    "Access",
    "posting a team form from another site, and as the admin",
    "403 pages; no team made",
)
async def test_other_sites_and_the_admin_cannot_post(app: App, client: httpx.AsyncClient):
    await sign_in(app, client, "alice")
    forged = await client.post(
        f"{PAGE}/team/create", data={"name": "Forged"}, headers={"Origin": "http://evil.test"}
    )
    assert forged.status_code == 403
    await client.post("/login", data={"token": ADMIN_TOKEN})
    admin = await post(client, "create", name="Organisers")
    assert admin.status_code == 403 and "acts for no user" in admin.text
    assert await team_count(app) == 0


LONG_TEAM = "The_team_whose_name_goes_on_and_on_and_on"[:40]


@pytest.mark.timeout(240)
async def test_teams_read_on_a_desktop_and_a_phone(app: App, live_url: str):
    await team_of_two(app, LONG_TEAM)
    await rank(app, "bob", 2e-6)
    await rank(app, "carol", 3e-6)
    async with chromium() as browser:
        tab = await browser.new_page(viewport=DESKTOP)
        await sign_in_page(app, tab, live_url, "carol")
        await tab.goto(f"{live_url}{PAGE}")
        for viewport, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
            await tab.set_viewport_size(viewport)
            await tab.goto(f"{live_url}{PAGE}")
            await expect(tab.locator("#gpu-CPU td.user .team")).to_have_text([LONG_TEAM])
            await expect(tab.get_by_role("button", name="Create team")).to_be_visible()
            await fits_without_scrolling_sideways(tab, name)
            await tab.get_by_role("link", name="1 team").click()
            await expect(tab.locator("#teams .teams li")).to_have_count(1)
            await expect(tab.locator("#teams .teams .members")).to_have_text("alice, bob")
            await fits_without_scrolling_sideways(tab, name)
            await tab.screenshot(path=screenshot_path(f"teams-{name}"), full_page=True)


async def fits_without_scrolling_sideways(tab: Page, name: str) -> None:
    fits = await tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fits, f"{tab.url} scrolls sideways on a {name}"
    assert await tab.evaluate(SIDEWAYS) == []
