"""Teams on a leaderboard: made, joined with a code, left; its members rank as one entry with
their best score; a size limit and one team per user per leaderboard hold under racing joins;
where the leaderboard says so, its hourly quota counts a team's submissions together."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from cluster_manager.core.records import InvalidNameError
from cluster_manager.core.teams import MAX_TEAM_SIZE
from cluster_manager.service import (
    AlreadyExistsError,
    AlreadyInTeamError,
    InvalidInviteError,
    NotFoundError,
    RateLimitedError,
    Submitter,
    TeamError,
    TeamFullError,
)
from cluster_manager.service.quotas import QuotaPolicy
from tests.storage.helpers import ALICE, BOB, CAROL, finish_submission, make_board, submit

DAVE = Submitter("dave", "Dave")


async def entries(service, gpu: str = "CPU") -> list[tuple[int, str, float, str | None]]:
    ranked = (await service.leaderboards.ranking("board", gpu))[gpu]
    return [(e.rank, e.user, e.score, e.team) for e in ranked]


async def team_of_two(service, name: str = "Fast Ones") -> None:
    """Alice's team with Bob in it."""
    await service.teams.create("board", name, ALICE)
    code = await service.teams.invite("board", ALICE)
    await service.teams.join(code, BOB)


async def test_a_teams_members_rank_as_one_entry_with_their_best(service, pool):
    await make_board(service)
    await team_of_two(service)
    await finish_submission(pool, await submit(service, user=ALICE), 3.0)
    await finish_submission(pool, await submit(service, user=BOB), 2.0)
    await finish_submission(pool, await submit(service, user=CAROL), 2.5)
    assert await entries(service) == [
        (1, BOB.external_id, 2.0, "Fast Ones"),
        (2, CAROL.external_id, 2.5, None),
    ]
    team = await service.teams.of_user("board", ALICE)
    assert team is not None and team.members == (ALICE.external_id, BOB.external_id)


async def test_leaving_a_team_ranks_the_member_on_their_own_again(service, pool):
    await make_board(service)
    await team_of_two(service)
    await finish_submission(pool, await submit(service, user=ALICE), 3.0)
    await finish_submission(pool, await submit(service, user=BOB), 2.0)
    assert await service.teams.leave("board", BOB) == "Fast Ones"
    assert await entries(service) == [
        (1, BOB.external_id, 2.0, None),
        (2, ALICE.external_id, 3.0, "Fast Ones"),
    ]
    await service.teams.leave("board", ALICE)  # the last member: the team is gone
    assert await service.teams.all("board") == []
    with pytest.raises(NotFoundError, match="you are in no team on 'board'"):
        await service.teams.leave("board", ALICE)


async def test_a_member_placement_is_the_teams_rank(service, pool):
    await make_board(service)
    await team_of_two(service)
    await finish_submission(pool, await submit(service, user=CAROL), 2.5)
    receipt = await submit(service, user=BOB)
    await finish_submission(pool, receipt, 2.0)
    (place,) = await service.submissions.placements(receipt.submission_id)
    assert (place.rank, place.improved) == (1, True)
    slower = await submit(service, user=ALICE)
    await finish_submission(pool, slower, 4.0)
    (place,) = await service.submissions.placements(slower.submission_id)
    assert (place.rank, place.improved, place.previous_best) == (1, False, 2.0)


async def test_one_team_per_user_per_leaderboard(service):
    await make_board(service)
    await make_board(service, "other")
    await team_of_two(service)
    with pytest.raises(AlreadyInTeamError, match="you are in team 'Fast Ones' on 'board'"):
        await service.teams.create("board", "Second", BOB)
    await service.teams.create("other", "Second", BOB)  # another leaderboard: fine
    code = await service.teams.invite("board", ALICE)
    with pytest.raises(AlreadyInTeamError):
        await service.teams.join(code, BOB)


@pytest.mark.parametrize(
    "name", ["", " lead", "trail ", "a" * 41, "ünïcode", "tab\tname", "new\nline", "-dash"]
)
async def test_a_team_name_that_does_not_read_as_written_is_refused(service, name):
    await make_board(service)
    with pytest.raises(InvalidNameError):
        await service.teams.create("board", name, ALICE)
    assert await service.teams.all("board") == []


async def test_team_names_are_unique_without_case(service):
    await make_board(service)
    await service.teams.create("board", "Fast", ALICE)
    with pytest.raises(AlreadyExistsError, match="has a team named 'fast' already"):
        await service.teams.create("board", "fast", BOB)


async def test_a_code_is_good_once_and_only_for_its_team(service):
    await make_board(service)
    await service.teams.create("board", "Fast", ALICE)
    code = await service.teams.invite("board", ALICE)
    team = await service.teams.join(f"  {code} ", BOB)
    assert team.members == (ALICE.external_id, BOB.external_id)
    with pytest.raises(InvalidInviteError, match="unknown or was used already"):
        await service.teams.join(code, CAROL)
    with pytest.raises(InvalidInviteError):
        await service.teams.join("team_nope", CAROL)
    with pytest.raises(TeamError, match="you are in no team on 'board'"):
        await service.teams.invite("board", CAROL)


async def test_the_size_limit_holds_even_for_racing_joins(service):
    await make_board(service)
    await service.teams.set_rules("board", size=2)
    await service.teams.create("board", "Pair", ALICE)
    codes = [await service.teams.invite("board", ALICE) for _ in range(3)]
    joined = await asyncio.gather(
        *(service.teams.join(c, u) for c, u in zip(codes, (BOB, CAROL, DAVE), strict=True)),
        return_exceptions=True,
    )
    assert sum(not isinstance(j, Exception) for j in joined) == 1
    refusals = [j for j in joined if isinstance(j, Exception)]
    assert all(isinstance(r, TeamFullError) for r in refusals), refusals
    assert "as many as 'board' allows" in str(refusals[0])
    (team,) = await service.teams.all("board")
    assert len(team.members) == 2 and team.size_limit == 2


@pytest.mark.parametrize("size", [0, -1, MAX_TEAM_SIZE + 1])
async def test_a_team_size_outside_its_range_is_refused(service, size):
    await make_board(service)
    with pytest.raises(TeamError, match=f"1 to {MAX_TEAM_SIZE} members, not {size}"):
        await service.teams.set_rules("board", size=size)
    assert (await service.leaderboards.get("board")).team_size == 4  # the default, unchanged


async def test_an_invite_only_board_has_teams_of_its_members_only(service):
    await make_board(service)
    await service.invites.set_closed("board", True)
    with pytest.raises(NotFoundError):  # as for a board that does not exist
        await service.teams.create("board", "Fast", ALICE)
    (code,) = await service.invites.mint("board", 1, 5, "org")
    await service.invites.join(code, ALICE)
    await service.teams.create("board", "Fast", ALICE)
    team_code = await service.teams.invite("board", ALICE)
    with pytest.raises(NotFoundError, match=r"^that team code is unknown or was used already$"):
        await service.teams.join(team_code, BOB)  # as an unknown code: no board named


async def test_a_shared_team_quota_counts_every_members_submissions(pool, clock, registry):
    from cluster_manager.service import Service

    service = Service(pool, registry, clock=clock, quotas=QuotaPolicy(ranked_per_hour=2))
    await make_board(service)
    await team_of_two(service)
    await submit(service, user=ALICE)
    await submit(service, user=BOB)
    await submit(service, user=CAROL)  # alone: two each
    await service.teams.set_rules("board", quotas=True)
    assert (await service.leaderboards.get("board")).team_quotas
    with pytest.raises(RateLimitedError, match="per hour on 'board' for your team"):
        await submit(service, user=BOB)
    await submit(service, user=CAROL)
    clock.now += timedelta(hours=1, seconds=1)
    await submit(service, user=BOB)


async def test_the_competitions_ranking_reads_the_teams_as_at_its_deadline(service, pool, clock):
    """Memberships are kept with when they began and ended: the competition's ranking and a
    placement in it group members as the deadline found them, whatever changed after it (the
    ranking of the runs after the deadline reads the teams of now), and follow the deadline
    where the organisers move it."""
    deadline = clock.now + timedelta(hours=1)
    await make_board(service, deadline=deadline)
    await team_of_two(service)
    await finish_submission(pool, await submit(service, user=ALICE), 3.0)
    await finish_submission(pool, await submit(service, user=BOB), 2.0)
    carols = await submit(service, user=CAROL)
    await finish_submission(pool, carols, 2.5)
    final = [(1, BOB.external_id, 2.0, "Fast Ones"), (2, CAROL.external_id, 2.5, None)]
    assert await entries(service) == final

    clock.now = deadline + timedelta(days=1)
    await service.teams.leave("board", BOB)
    await service.teams.join(await service.teams.invite("board", ALICE), CAROL)
    assert await entries(service) == final
    (place,) = await service.submissions.placements(carols.submission_id)
    assert place.rank == 2
    late = await submit(service, user=CAROL)
    await finish_submission(pool, late, 1.0)
    after = (await service.leaderboards.ranking("board", "CPU", after_deadline=True))["CPU"]
    assert [(e.user, e.team) for e in after] == [(CAROL.external_id, "Fast Ones")]

    # The deadline moved past the changes: the ranking reads the teams as they are now.
    await pool.execute("UPDATE leaderboards SET deadline = $1", clock.now + timedelta(hours=1))
    assert await entries(service) == [
        (1, BOB.external_id, 2.0, None),
        (2, CAROL.external_id, 2.5, "Fast Ones"),
    ]


async def test_a_disbanded_teams_name_stays_in_the_final_standings_and_is_free_again(
    service, pool, clock
):
    deadline = clock.now + timedelta(hours=1)
    await make_board(service, deadline=deadline)
    await team_of_two(service)
    await finish_submission(pool, await submit(service, user=BOB), 2.0)
    clock.now = deadline + timedelta(days=1)
    code = await service.teams.invite("board", ALICE)
    await service.teams.leave("board", ALICE)
    await service.teams.leave("board", BOB)  # the last member: the team is disbanded
    assert await service.teams.all("board") == [] and await service.teams.count("board") == 0
    with pytest.raises(InvalidInviteError, match="unknown or was used already"):
        await service.teams.join(code, CAROL)
    await service.teams.create("board", "fast ones", CAROL)
    assert await entries(service) == [(1, BOB.external_id, 2.0, "Fast Ones")]
    assert [t.name for t in await service.teams.all("board")] == ["fast ones"]
