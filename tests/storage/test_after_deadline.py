"""Runs after a leaderboard's deadline: taken by default, marked, ranked on their own, never in
the competition's ranking or its history (nor in announcements, made of open boards only);
refused where the organisers
turned them off."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.service import DeadlinePassedError
from cluster_manager.storage import history as history_store
from cluster_manager.storage import submissions as sub_store
from tests.storage.helpers import ALICE, BOB, count_rows, finish_submission, make_board, submit


@pytest.fixture
async def ended(service, clock):
    """A leaderboard whose deadline passed a day ago, with Alice ranked in time at 5.0."""
    deadline = clock.now + timedelta(hours=1)
    board = await make_board(service, deadline=deadline)
    await finish_submission(service.pool, await submit(service, user=ALICE), 5.0)
    clock.now = deadline + timedelta(days=1)
    return board


async def scores(service, *, after_deadline: bool) -> list[tuple[int, str, float]]:
    entries = (await service.leaderboards.ranking("board", "CPU", after_deadline=after_deadline))[
        "CPU"
    ]
    return [(e.rank, e.user, e.score) for e in entries]


async def test_a_run_after_the_deadline_ranks_on_its_own_tab(service, pool, ended):
    assert ended.after_deadline_runs  # on by default
    receipt = await submit(service, user=BOB)
    assert receipt.after_deadline
    stored = await sub_store.get_submission(pool, receipt.submission_id)
    assert stored is not None and stored.after_deadline
    history_before = await history_store.history_version(pool, ended.id)
    await finish_submission(pool, receipt, 1.0)  # faster than the competition's winner

    assert await scores(service, after_deadline=False) == [(1, ALICE.external_id, 5.0)]
    assert await scores(service, after_deadline=True) == [(1, BOB.external_id, 1.0)]
    assert await history_store.history_version(pool, ended.id) == history_before
    history = await service.leaderboards.score_history("board", "CPU")
    assert [p.user for p in history.points] == [ALICE.external_id]
    (placement,) = await service.submissions.placements(receipt.submission_id)
    assert placement.after_deadline and placement.rank == 1 and placement.improved


async def test_the_competitions_winner_also_ranks_after_the_deadline_on_their_own(
    service, pool, ended
):
    """Alice's in-time 5.0 stays hers in the competition; her slower run after the deadline
    is her entry on the other tab, and a faster one replaces it there only."""
    await finish_submission(pool, await submit(service, user=ALICE), 7.0)
    assert await scores(service, after_deadline=True) == [(1, ALICE.external_id, 7.0)]
    await finish_submission(pool, await submit(service, user=ALICE), 2.0)
    assert await scores(service, after_deadline=True) == [(1, ALICE.external_id, 2.0)]
    assert await scores(service, after_deadline=False) == [(1, ALICE.external_id, 5.0)]


async def test_a_test_run_after_the_deadline_is_taken_and_marked(service, pool, ended):
    receipt = await submit(service, user=BOB, mode=Mode.TEST)
    stored = await sub_store.get_submission(pool, receipt.submission_id)
    assert stored is not None and stored.after_deadline and stored.mode is Mode.TEST


async def test_a_run_in_time_is_not_marked(service, pool, clock):
    await make_board(service, deadline=clock.now + timedelta(hours=1))
    receipt = await submit(service, user=BOB)
    stored = await sub_store.get_submission(pool, receipt.submission_id)
    assert stored is not None and not stored.after_deadline


async def test_turned_off_runs_after_the_deadline_are_refused_and_turned_on_taken(
    service, pool, ended
):
    board = await service.controls.set_after_deadline_runs("board", False, "organiser")
    assert not board.after_deadline_runs
    before = await count_rows(pool)
    with pytest.raises(DeadlinePassedError, match="take no runs after it"):
        await submit(service, user=BOB)
    assert await count_rows(pool) == before
    assert (
        await service.controls.set_after_deadline_runs("board", True, "organiser")
    ).after_deadline_runs
    await submit(service, user=BOB)
