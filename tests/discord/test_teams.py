"""Teams in Discord: `/team create`, `/team invite` (a private single-use code), `/team join`,
`/team leave`, `/team show`; a team ranks as one entry in `/leaderboard show`; `/admin teams`
sets a leaderboard's team size and quota rule, for Leaderboard Admins only."""

from __future__ import annotations

import re

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.service import Submitter
from tests.discord.conftest import ADMIN, ALICE, BOB, CREATOR, SOLUTION, Member, create_board
from tests.discord.test_errors import assert_private_error
from tests.storage.helpers import finish_submission

CODE = re.compile(r"team_[A-Za-z0-9_-]+")


def as_submitter(member: Member) -> Submitter:
    return Submitter(str(member.id), member.name)


async def invite_code(harness, member: Member = ALICE) -> str:
    reply = await harness.command("team invite", member, leaderboard="identity")
    assert reply.only.ephemeral
    assert "`/team join code:team_" in reply.only.content
    found = CODE.search(reply.only.content)
    assert found is not None, reply.only.content
    return found.group()


@pytest.fixture
async def team(harness, app, clock):
    """Alice's team "Fast Ones" on identity, with Bob in it."""
    await create_board(app, clock)
    created = await harness.command("team create", leaderboard="identity", name="Fast Ones")
    assert created.only.ephemeral
    assert "Team **Fast Ones** is on **identity**" in created.only.content
    joined = await harness.command("team join", BOB, code=await invite_code(harness))
    assert joined.only.ephemeral
    assert "You joined team **Fast Ones** on **identity** (2/4 members)" in joined.only.content
    return harness


async def test_create_invite_join_and_show_list_both_members(team, app):
    shown = await team.command("team show", BOB, leaderboard="identity")
    (page,) = shown.only.embeds
    assert shown.only.ephemeral
    assert page["title"] == "👥 Fast Ones on identity (2/4)"
    assert page["description"] == f"1. <@{ALICE.id}>\n2. <@{BOB.id}>"

    every = await team.command("team show", CREATOR, leaderboard="identity", all=True)
    (page,) = every.only.embeds
    assert every.only.ephemeral
    assert page["description"] == f"**Fast Ones** (2/4): <@{ALICE.id}>, <@{BOB.id}>"
    stored = await app.service.teams.of_user("identity", as_submitter(BOB))
    assert stored is not None and stored.members == (str(ALICE.id), str(BOB.id))


async def test_show_without_a_team_says_how_to_get_one(harness, app, clock):
    await create_board(app, clock)
    mine = await harness.command("team show", leaderboard="identity")
    assert mine.only.ephemeral and "You are in no team on **identity**" in mine.only.content
    every = await harness.command("team show", leaderboard="identity", all=True)
    assert "No teams on identity yet" in every.only.embeds[0]["description"]


async def test_a_code_is_good_once(team, app):
    code = await invite_code(team)
    await team.command("team join", CREATOR, code=code)
    again = await team.command("team join", ADMIN, code=code)
    assert_private_error(again, "Invite refused", "unknown or was used already")
    assert await app.service.teams.of_user("identity", as_submitter(ADMIN)) is None


async def test_a_second_team_for_a_member_is_refused_with_the_reason(team, app):
    other = await team.command("team create", BOB, leaderboard="identity", name="Others")
    assert_private_error(other, "Already in a team", "you are in team 'Fast Ones'", "leave it")
    await team.command("team create", CREATOR, leaderboard="identity", name="Others")
    code = await invite_code(team, CREATOR)
    moved = await team.command("team join", BOB, code=code)
    assert_private_error(moved, "Already in a team", "leave it first")
    assert [t.name for t in await app.service.teams.all("identity")] == ["Fast Ones", "Others"]


async def test_a_full_team_takes_no_one_more(team, app):
    code = await invite_code(team)
    limited = await team.command("admin teams", ADMIN, leaderboard="identity", size=2)
    assert "up to 2 members" in limited.only.content
    full = await team.command("team join", CREATOR, code=code)
    assert_private_error(full, "Team full", "as many as 'identity' allows")
    pointless = await team.command("team invite", ALICE, leaderboard="identity")
    assert_private_error(pointless, "Team full", "nobody could join with a new code")
    stored = await app.service.teams.of_user("identity", as_submitter(ALICE))
    assert stored is not None and len(stored.members) == 2


async def test_leave_takes_the_member_out_and_invite_needs_a_team(team, app):
    left = await team.command("team leave", BOB, leaderboard="identity")
    assert left.only.ephemeral
    assert "You left team **Fast Ones** on **identity**" in left.only.content
    assert await app.service.teams.of_user("identity", as_submitter(BOB)) is None
    again = await team.command("team leave", BOB, leaderboard="identity")
    assert_private_error(again, "Not found", "in no team on 'identity'")
    no_team = await team.command("team invite", BOB, leaderboard="identity")
    assert_private_error(no_team, "Team", "create one or join one first")


async def test_a_bad_team_name_and_an_unknown_board_are_refused(harness, app, clock):
    await create_board(app, clock)
    bad = await harness.command("team create", leaderboard="identity", name=" *bold* ")
    assert_private_error(bad, "Invalid name")
    unknown = await harness.command("team create", leaderboard="nope", name="Fine")
    assert_private_error(unknown, "Not found")
    assert await app.service.teams.all("identity") == []


async def test_team_commands_autocomplete_leaderboards(harness, app, clock):
    await create_board(app, clock)
    for path in ("team create", "team invite", "team leave", "team show"):
        assert await harness.autocomplete(path, "leaderboard", leaderboard="ide") == ["identity"]


async def test_leaderboard_show_ranks_the_team_as_one_entry_with_its_best(team, app):
    for member, score in ((ALICE, 3e-3), (BOB, 1e-3), (CREATOR, 2e-3)):
        receipt = await app.service.submissions.submit(
            "identity", as_submitter(member), "s.py", SOLUTION, mode=Mode.LEADERBOARD
        )
        await finish_submission(app.pool, receipt, score)
    shown = await team.command("leaderboard show", name="identity")
    (page,) = shown.only.embeds
    lines = page["description"].split("\n")
    assert len(lines) == 2, lines
    assert lines[0].startswith("`#1` **Fast Ones** (bob) · **1 ms**")
    assert lines[1].startswith("`#2` carol · **2 ms**")
    assert "alice" not in page["description"]


@pytest.mark.reliability(
    "Access",
    "/admin teams setting a leaderboard's team size and shared quota",
    "an admin's answer names the rules now and they are stored; a member is refused "
    "('Missing role') and nothing changes",
)
async def test_admin_teams_sets_the_rules_for_admins_only(harness, app, clock):
    await create_board(app, clock)
    denied = await harness.command("admin teams", BOB, leaderboard="identity", size=9)
    assert denied.only.ephemeral and "Missing role" in denied.only.content
    assert (await app.service.leaderboards.get("identity")).team_size == 4

    shown = await harness.command("admin teams", ADMIN, leaderboard="identity")
    assert "**identity** takes teams of up to 4 members" in shown.only.content
    assert "each member's submissions on their own" in shown.only.content
    changed = await harness.command(
        "admin teams", ADMIN, leaderboard="identity", size=9, shared_quota=True
    )
    assert changed.only.ephemeral
    assert "up to 9 members; its hourly quota counts a team's submissions together" in (
        changed.only.content
    )
    board = await app.service.leaderboards.get("identity")
    assert board.team_size == 9 and board.team_quotas
