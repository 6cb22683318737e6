"""Rerunning ranked submissions after a task fix: queued behind everyone's own jobs; each
ranking entry keeps its old score until its new pair is in, then takes the new one (better,
worse, or gone when the rerun fails); the ranking never misses a score in between."""

from __future__ import annotations

import pytest

from cluster_manager.core.records import JobState
from cluster_manager.service import NotFoundError, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import queue_order
from tests.storage.helpers import (
    ALICE,
    BOB,
    CAROL,
    finish_job,
    finish_submission,
    make_board,
    submit,
)


async def standing(service) -> list[tuple[str, float]]:
    return [(e.user, e.score) for e in (await service.leaderboards.ranking("board", "CPU"))["CPU"]]


@pytest.fixture
async def season(service, pool):
    await make_board(service)
    receipts = {}
    for user, score in ((ALICE, 1.0), (BOB, 2.0), (CAROL, 3.0)):
        receipts[user.external_id] = await submit(service, user=user, gpus=["CPU"])
        await finish_submission(pool, receipts[user.external_id], score)
    return receipts


async def test_the_ranking_switches_as_each_rerun_finishes(service, pool, season):
    jobs = await service.reruns.enqueue("board")
    assert len(jobs) == 6 and all(j.state is JobState.QUEUED for j in jobs)
    by_submission = {}
    for job in jobs:
        by_submission.setdefault(job.submission_id, {})[job.secret] = job
    rerun_of = {user: by_submission[r.submission_id] for user, r in season.items()}
    assert await standing(service) == [("alice", 1.0), ("bob", 2.0), ("carol", 3.0)]

    # Half of bob's pair is in: his old score holds.
    await finish_job(pool, rerun_of["bob"][False], True, 2.5)
    assert await standing(service) == [("alice", 1.0), ("bob", 2.0), ("carol", 3.0)]
    await finish_job(pool, rerun_of["bob"][True], True, 2.5)
    assert await standing(service) == [("alice", 1.0), ("bob", 2.5), ("carol", 3.0)]  # worse

    # Alice's kernel is wrong under the fixed task: she leaves the ranking.
    await finish_job(pool, rerun_of["alice"][True], True, 1.0)
    assert ("alice", 1.0) in await standing(service)
    await finish_job(pool, rerun_of["alice"][False], False, None)
    assert await standing(service) == [("bob", 2.5), ("carol", 3.0)]

    await finish_job(pool, rerun_of["carol"][False], True, 0.5)
    await finish_job(pool, rerun_of["carol"][True], True, 0.5)
    assert await standing(service) == [("carol", 0.5), ("bob", 2.5)]

    # A later rerun is a new generation again.
    again = await service.reruns.enqueue("board", user="carol")
    assert len(again) == 2
    for job in again:
        await finish_job(pool, job, True, 0.75)
    assert await standing(service) == [("carol", 0.75), ("bob", 2.5)]


async def test_reruns_queue_behind_everyones_own_jobs(service, pool, season):
    await service.reruns.enqueue("board", submission_id=season["alice"].submission_id)
    fresh = await submit(service, user=Submitter("dave", "dave"), gpus=["CPU"])
    claimed = await job_store.claim(pool, owner="w", gpu="CPU", max_active=10, lease_s=60, limit=1)
    assert [j.submission_id for j in claimed] == [fresh.submission_id]
    position = await queue_order.queue_position(pool, fresh.jobs[1].id)
    assert position == 1  # the rerun waits behind it


async def test_nothing_to_rerun_is_a_clear_error(service, season):
    with pytest.raises(NotFoundError, match="nothing ranked on 'board' matches"):
        await service.reruns.enqueue("board", submission_id=999_999)
    with pytest.raises(NotFoundError, match="no user 'nobody'"):
        await service.reruns.enqueue("board", user="nobody")
