"""Organisers' controls over a real Postgres: pauses (everywhere, per leaderboard) and bans
refuse new submissions with the reason, keep what is queued, and hide a banned user's
rankings without deleting them; stats count what happened."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.core.records import ChannelPolicy
from cluster_manager.service import (
    BannedError,
    InvalidChannelPolicyError,
    MissingReasonError,
    NotFoundError,
    SubmissionsPausedError,
)
from cluster_manager.storage import jobs as job_store
from tests.storage.helpers import ALICE, BOB, finish_submission, make_board, submit


@pytest.fixture
async def boards(service):
    await make_board(service, "board")
    await make_board(service, "other")


async def test_a_global_pause_stops_every_board_and_keeps_queued_jobs(service, pool, boards):
    queued = await submit(service)
    pause = await service.controls.pause(None, "  GPU outage,\n back soon ", "org")
    assert (pause.leaderboard, pause.reason, pause.paused_by) == (
        None,
        "GPU outage, back soon",
        "org",
    )
    for board in ("board", "other"):
        with pytest.raises(SubmissionsPausedError, match="paused everywhere: GPU outage"):
            await submit(service, board)
    job = await job_store.get_job(pool, queued.jobs[0].id)
    assert job is not None and job.state.value == "queued"  # still runs
    assert await service.controls.resume(None) is True
    assert await service.controls.resume(None) is False
    await submit(service, "other")


async def test_a_board_pause_stops_that_board_only(service, boards):
    await service.controls.pause("board", "fixing the task", "org")
    await service.controls.pause("board", "fixing the task, again", "org2")  # updates
    assert [(p.leaderboard, p.reason) for p in await service.controls.pauses()] == [
        ("board", "fixing the task, again")
    ]
    with pytest.raises(SubmissionsPausedError, match="on 'board': fixing the task, again"):
        await submit(service, "board")
    await submit(service, "other")
    with pytest.raises(NotFoundError):
        await service.controls.pause("nope", "x", "org")
    with pytest.raises(MissingReasonError):
        await service.controls.pause("other", " \n ", "org")


async def test_a_ban_refuses_and_hides_and_unbanning_shows_again(service, pool, boards):
    for user, score in ((ALICE, 1.0), (BOB, 2.0)):
        await finish_submission(pool, await submit(service, user=user, gpus=["CPU"]), score)
    history_before = await service.leaderboards.history_key("board", "CPU")
    ban = await service.controls.ban(ALICE, "generated spam", "org")
    assert (ban.user, ban.reason) == ("alice", "generated spam")
    with pytest.raises(BannedError, match="generated spam"):
        await submit(service, user=ALICE)
    ranking = (await service.leaderboards.ranking("board", "CPU"))["CPU"]
    assert [(e.rank, e.user) for e in ranking] == [(1, "bob")]
    assert [p.user for p in (await service.leaderboards.score_history("board", "CPU")).points] == [
        "bob"
    ]
    assert await service.leaderboards.history_key("board", "CPU") != history_before  # charts redraw
    assert await pool.fetchval("SELECT count(*) FROM rankings") == 2  # hidden, not deleted
    assert await service.controls.unban("alice") is True
    assert await service.controls.unban("alice") is False
    assert [e.user for e in (await service.leaderboards.ranking("board", "CPU"))["CPU"]] == [
        "alice",
        "bob",
    ]
    with pytest.raises(NotFoundError, match="no user 'nobody'"):
        await service.controls.unban("nobody")


async def test_stats_count_submissions_runs_waits_and_verdicts(service, pool, boards, clock):
    await finish_submission(pool, await submit(service, gpus=["CPU"]), 1.0)
    await finish_submission(pool, await submit(service, user=BOB, gpus=["CPU"]), passed=False)
    await submit(service, user=BOB, gpus=["CPU"])  # still queued
    stats = await service.controls.stats()
    assert (stats.submissions, stats.submitters, stats.runs) == (3, 2, 4)
    assert stats.verdicts["passed"] == 2 and sum(stats.verdicts.values()) == 4
    cpu = stats.gpus["CPU"]
    assert (cpu.runs, cpu.queued, cpu.running) == (4, 2, 0)
    assert cpu.wait_p50_s is not None and cpu.wait_p95_s >= cpu.wait_p50_s >= 0
    assert (await service.controls.stats(last_day=True)).submissions == 3
    clock.now += timedelta(days=2)
    recent = await service.controls.stats(last_day=True)
    assert recent.since == clock.now - timedelta(days=1) and recent.submissions == 0
    assert (await service.controls.stats()).submissions == 3


async def test_invalidating_a_submission_reranks_its_user_and_restoring_undoes_it(
    service, pool, boards
):
    receipts = {}
    for user, score in ((ALICE, 3.0), (ALICE, 1.0), (BOB, 1.5)):
        receipts[(user.external_id, score)] = await submit(service, user=user, gpus=["CPU"])
        await finish_submission(pool, receipts[(user.external_id, score)], score)
    best = receipts[("alice", 1.0)].submission_id

    async def standing() -> list[tuple[str, float]]:
        return [
            (e.user, e.score) for e in (await service.leaderboards.ranking("board", "CPU"))["CPU"]
        ]

    assert await standing() == [("alice", 1.0), ("bob", 1.5)]
    await service.controls.invalidate(best, "used a cached answer", "org")
    assert await standing() == [("bob", 1.5), ("alice", 3.0)]
    history = await service.leaderboards.score_history("board", "CPU")
    assert 1.0 not in [p.score for p in history.points]  # the chart forgets it too
    report = await service.submissions.report(best)
    assert report.submission.invalidated == "used a cached answer (org)"
    await service.controls.restore(best)
    assert await standing() == [("alice", 1.0), ("bob", 1.5)]
    assert (await service.submissions.report(best)).submission.invalidated is None
    with pytest.raises(NotFoundError):
        await service.controls.invalidate(999_999, "x", "org")
    with pytest.raises(MissingReasonError):
        await service.controls.invalidate(best, "", "org")


async def test_an_invalidated_submission_whose_run_ends_later_is_not_ranked(service, pool, boards):
    receipt = await submit(service, gpus=["CPU"])
    await service.controls.invalidate(receipt.submission_id, "duplicate account", "org")
    await finish_submission(pool, receipt, 1.0)
    assert (await service.leaderboards.ranking("board", "CPU"))["CPU"] == []


async def test_a_channel_policy_is_set_by_an_admin_and_read_with_the_leaderboard(
    service, boards, clock
):
    assert (await service.leaderboards.get("board")).channel_policy is ChannelPolicy.RANKED
    board = await service.controls.set_channel_policy("board", "all", "org")
    assert board.channel_policy is ChannelPolicy.ALL
    assert (await service.leaderboards.get("board")).channel_policy is ChannelPolicy.ALL
    assert (await service.leaderboards.get("other")).channel_policy is ChannelPolicy.RANKED
    await service.controls.set_channel_policy("other", ChannelPolicy.NONE, "org2")
    assert [
        (c.leaderboard, c.policy, c.set_by, c.set_at)
        for c in await service.controls.channel_policies()
    ] == [
        ("board", ChannelPolicy.ALL, "org", clock.now),
        ("other", ChannelPolicy.NONE, "org2", clock.now),
    ]
    assert (await service.controls.channel_policies())[0].to_json() == {
        "leaderboard": "board",
        "policy": "all",
        "set_by": "org",
        "set_at": clock.now.isoformat(),
    }
    await service.controls.set_channel_policy("board", "ranked", "org")
    assert [c.leaderboard for c in await service.controls.channel_policies()] == ["other"]
    with pytest.raises(InvalidChannelPolicyError, match="one of ranked, none, all, not 'loud'"):
        await service.controls.set_channel_policy("board", "loud", "org")
    with pytest.raises(NotFoundError):
        await service.controls.set_channel_policy("nope", "all", "org")


@pytest.mark.parametrize(
    ("policy", "published"),
    [
        (ChannelPolicy.RANKED, {Mode.LEADERBOARD}),
        (ChannelPolicy.NONE, set()),
        (ChannelPolicy.ALL, set(Mode)),
    ],
)
async def test_what_a_policy_publishes_and_never_for_an_invite_only_board(
    service, boards, policy, published
):
    board = await service.controls.set_channel_policy("board", policy, "org")
    assert {m for m in Mode if board.publishes(m)} == published
    await service.invites.set_closed("board", True)
    closed = await service.leaderboards.get("board")
    assert closed.channel_policy is policy
    assert not any(closed.publishes(m) for m in Mode)
