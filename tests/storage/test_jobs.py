"""The job queue: claims, concurrency limits, leases, take-over, release and status."""

from __future__ import annotations

import asyncio

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.core.records import JobState
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import queue as queue_store
from cluster_manager.storage import queue_order
from tests.storage.helpers import (
    ALICE,
    BOB,
    OTHER_OWNER,
    OWNER,
    count_rows,
    dispatch,
    make_board,
    record,
    submit,
)


async def claim(pool, gpu="CPU", *, owner=OWNER, max_active=10, limit=10, lease_s=60.0, **kw):
    return await job_store.claim(
        pool, owner=owner, gpu=gpu, max_active=max_active, lease_s=lease_s, limit=limit, **kw
    )


async def take_over(pool, *gpus, owner=OTHER_OWNER, lease_s=60.0):
    """The jobs adopted (without their previous owners)."""
    adopted = await job_store.take_over_expired(
        pool, owner=owner, lease_s=lease_s, gpus=list(gpus or ("CPU",))
    )
    return [a.job for a in adopted]


async def queue_test_jobs(service, n, *, gpus=("CPU",), user=ALICE):
    """`n` test-mode submissions, one job per GPU each; returns their receipts."""
    return [await submit(service, user=user, gpus=list(gpus), mode=Mode.TEST) for _ in range(n)]


async def state_counts(pool) -> dict[str, int]:
    rows = await pool.fetch("SELECT state, count(*) AS n FROM jobs GROUP BY state")
    return {r["state"]: r["n"] for r in rows}


@pytest.fixture
async def board(service):
    return await make_board(service, gpus=["CPU", "H100"])


# --- claiming ---------------------------------------------------------------------------------


async def test_claim_respects_max_active(service, pool, board):
    receipts = await queue_test_jobs(service, 5)
    first = await claim(pool, max_active=2, limit=10)
    assert [j.submission_id for j in first] == [r.submission_id for r in receipts[:2]]
    for job in first:
        assert job.state is JobState.CLAIMED
        assert job.lease_owner == OWNER
        assert job.attempts == 1
    assert await claim(pool, max_active=2, limit=10) == []
    # A dispatched job still counts as in flight.
    await dispatch(pool, first[0])
    assert await claim(pool, max_active=2) == []
    # A larger limit makes room for exactly the difference.
    assert len(await claim(pool, max_active=3)) == 1
    assert await state_counts(pool) == {"queued": 2, "claimed": 2, "dispatched": 1}


async def test_claim_takes_at_most_limit(service, pool, board):
    await queue_test_jobs(service, 4)
    assert len(await claim(pool, max_active=10, limit=1)) == 1
    assert len(await claim(pool, max_active=10, limit=2)) == 2
    assert len(await claim(pool, max_active=10, limit=0)) == 0
    assert len(await claim(pool, max_active=10, limit=5)) == 1
    assert await claim(pool) == []


async def test_finished_jobs_free_their_slot(service, pool, board):
    await queue_test_jobs(service, 3)
    [job] = await claim(pool, max_active=1)
    assert await claim(pool, max_active=1) == []
    assert await record(pool, job, True, None)
    [second] = await claim(pool, max_active=1)
    assert second.id > job.id
    assert await job_store.release(pool, job_id=second.id, owner=OWNER, error="x", retry=False)
    assert len(await claim(pool, max_active=1)) == 1


async def test_one_users_jobs_start_first_in_first_out(service, pool, board):
    receipts = await queue_test_jobs(service, 3, user=BOB)
    order = [r.jobs[0].id for r in receipts]
    claimed = []
    for _ in range(3):
        claimed += await claim(pool, limit=1)
    assert [j.id for j in claimed] == order
    receipts = await queue_test_jobs(service, 3)
    batch = await claim(pool, max_active=100, limit=3)
    assert [j.id for j in batch] == [r.jobs[0].id for r in receipts]


@pytest.mark.reliability(
    "Faults",
    "one user queues a burst of five jobs, another user one job after it",
    "users take turns: the second user's job starts second, and the places in line say so",
)
async def test_users_take_turns_so_a_burst_holds_back_nobodys_next_job(
    service, pool, board, record_property
):
    """Bob queues five, then Alice one: hers starts second, not sixth; their places in line
    say so before anything starts."""
    bobs = [r.jobs[0] for r in await queue_test_jobs(service, 5, user=BOB)]
    [alices] = [r.jobs[0] for r in await queue_test_jobs(service, 1, user=ALICE)]
    assert await queue_order.queue_position(pool, alices.id) == 2
    assert [await queue_order.queue_position(pool, j.id) for j in bobs] == [1, 3, 4, 5, 6]
    [open_job] = await queue_store.open_jobs_of(pool, ALICE.external_id)
    assert open_job.position == 2
    claimed = []
    for _ in range(6):
        claimed += await claim(pool, limit=1)
    record_property("observed", f"claimed in order {[j.id for j in claimed]}, Alice's {alices.id}")
    assert [j.id for j in claimed] == [bobs[0].id, alices.id, *(j.id for j in bobs[1:])]


async def test_gpus_are_independent(service, pool, board):
    receipts = await queue_test_jobs(service, 3, gpus=("CPU", "H100"))
    cpu = await claim(pool, "CPU", max_active=1)
    h100 = await claim(pool, "H100", max_active=1)
    assert [j.gpu for j in cpu] == ["CPU"]
    assert [j.gpu for j in h100] == ["H100"]
    assert cpu[0].submission_id == h100[0].submission_id == receipts[0].submission_id
    # H100 being full does not stop CPU, and the reverse.
    assert await claim(pool, "H100", max_active=1) == []
    assert len(await claim(pool, "CPU", max_active=2)) == 1
    assert await claim(pool, "A100") == []
    rows = await pool.fetch(
        "SELECT gpu, state, count(*) AS n FROM jobs GROUP BY 1, 2 ORDER BY 1, 2"
    )
    assert [tuple(r) for r in rows] == [
        ("CPU", "claimed", 2),
        ("CPU", "queued", 1),
        ("H100", "claimed", 1),
        ("H100", "queued", 2),
    ]


async def test_claim_only_given_submissions(service, pool, board):
    receipts = await queue_test_jobs(service, 4)
    wanted = [receipts[2].submission_id, receipts[3].submission_id]
    claimed = await claim(pool, submission_ids=wanted)
    assert [j.submission_id for j in claimed] == wanted
    assert await claim(pool, submission_ids=wanted) == []
    assert await claim(pool, submission_ids=[]) == []
    assert await claim(pool, submission_ids=[999_999]) == []
    # Other submissions' jobs are still queued for everyone else.
    rest = await claim(pool, owner=OTHER_OWNER)
    assert [j.submission_id for j in rest] == [r.submission_id for r in receipts[:2]]


async def test_claim_with_submission_filter_still_respects_max_active(service, pool, board):
    receipts = await queue_test_jobs(service, 3)
    await claim(pool, max_active=2, limit=2)
    mine = [receipts[2].submission_id]
    assert await claim(pool, max_active=2, submission_ids=mine) == []
    assert len(await claim(pool, max_active=3, submission_ids=mine)) == 1


@pytest.mark.reliability(
    "Faults",
    "10 workers race to claim 12 jobs on a GPU type that allows 3 at a time",
    "exactly 3 claimed, each by one worker; the other 9 stay queued",
)
async def test_concurrent_claims_never_exceed_max_active(service, pool, board, record_property):
    await queue_test_jobs(service, 12)
    results = await asyncio.gather(
        *(claim(pool, owner=f"worker-{i}", max_active=3, limit=2) for i in range(10))
    )
    claimed = [j for batch in results for j in batch]
    record_property(
        "observed",
        f"{len(claimed)} claimed by {len({j.lease_owner for j in claimed})} worker(s); "
        f"states {await state_counts(pool)}",
    )
    assert len(claimed) == 3
    assert len({j.id for j in claimed}) == 3
    assert await state_counts(pool) == {"queued": 9, "claimed": 3}
    owners = await pool.fetch("SELECT id, lease_owner FROM jobs WHERE state = 'claimed'")
    assert {r["id"]: r["lease_owner"] for r in owners} == {j.id: j.lease_owner for j in claimed}


@pytest.mark.reliability(
    "Faults",
    "10 workers race to claim 12 jobs, 2 each, with room for all",
    "every job is claimed exactly once, on its first attempt",
)
async def test_concurrent_claims_never_claim_a_job_twice(service, pool, board, record_property):
    await queue_test_jobs(service, 12)
    results = await asyncio.gather(
        *(claim(pool, owner=f"worker-{i}", max_active=100, limit=2) for i in range(10))
    )
    claimed = [j.id for batch in results for j in batch]
    record_property("observed", f"{len(claimed)} claims of {len(set(claimed))} distinct jobs")
    assert len(claimed) == 12
    assert len(set(claimed)) == 12
    attempts = await pool.fetch("SELECT attempts FROM jobs")
    assert {r["attempts"] for r in attempts} == {1}


# --- leases -----------------------------------------------------------------------------------


@pytest.mark.reliability(
    "Faults",
    "a worker dies holding a dispatched job: its lease expires",
    "another worker takes it over and re-attaches to the same run; nothing is dispatched again",
)
async def test_expired_lease_is_taken_over_by_another_owner(service, pool, board, record_property):
    await queue_test_jobs(service, 2, gpus=("CPU", "H100"))
    [job] = await claim(pool, max_active=1, lease_s=30)
    assert await take_over(pool, "CPU") == []  # not expired yet
    job = await dispatch(pool, job)
    [kept] = await claim(pool, "H100", max_active=1, lease_s=60)
    # The worker dies: its lease runs out.
    await pool.execute(
        "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", job.id
    )
    # Only the GPUs asked for, and only expired leases.
    assert await take_over(pool, "H100") == []
    [(adopted, previous_owner)] = await job_store.take_over_expired(
        pool, owner=OTHER_OWNER, lease_s=60, gpus=["CPU", "H100"]
    )
    assert previous_owner == OWNER  # what the scheduler's log line names
    record_property(
        "observed",
        f"taken over by {adopted.lease_owner}: {adopted.state.value}, external id "
        f"{adopted.external_id}, attempt {adopted.attempts}",
    )
    assert adopted.id == job.id
    assert adopted.lease_owner == OTHER_OWNER
    assert adopted.state is JobState.DISPATCHED
    assert adopted.external_id == f"ext-{job.id}"  # re-attached, not dispatched again
    assert adopted.attempts == 1
    assert (await job_store.get_job(pool, kept.id)).lease_owner == OWNER
    # Still in flight: it keeps its slot.
    assert await claim(pool, max_active=1) == []
    # Nothing left to take over.
    assert await take_over(pool, "CPU", owner="worker-c") == []


@pytest.mark.reliability(
    "Faults",
    "a worker whose lease expired wakes up and renews, dispatches, releases and records its job",
    "every write of the old owner is refused; the new owner records the result exactly once",
)
async def test_old_owner_cannot_touch_a_job_taken_over(service, pool, board, record_property):
    await queue_test_jobs(service, 1)
    [job] = await claim(pool, lease_s=0.2)
    await asyncio.sleep(0.3)
    [adopted] = await take_over(pool, "CPU")
    assert await job_store.renew_leases(pool, owner=OWNER, job_ids=[job.id], lease_s=60) == set()
    assert not await job_store.set_external_id(
        pool, job_id=job.id, owner=OWNER, launcher="fake", external_id="stale"
    )
    assert not await job_store.mark_dispatched(pool, job_id=job.id, owner=OWNER)
    assert await job_store.release(pool, job_id=job.id, owner=OWNER, error="x", retry=True) is None
    assert not await record(pool, job, True, 1.0, owner=OWNER)
    assert await count_rows(pool, "runs") == {"runs": 0}
    fresh = await job_store.get_job(pool, job.id)
    assert fresh.state is JobState.CLAIMED
    assert fresh.lease_owner == OTHER_OWNER
    assert fresh.external_id is None
    # The new owner finishes it, exactly once.
    assert await record(pool, adopted, True, 1.0, owner=OTHER_OWNER)
    assert not await record(pool, adopted, True, 1.0, owner=OTHER_OWNER)
    assert not await record(pool, job, True, 1.0, owner=OWNER)
    rows = await count_rows(pool, "runs")
    record_property("observed", f"the old owner's 5 writes refused; {rows['runs']} run row")
    assert rows == {"runs": 1}
    assert (await job_store.get_job(pool, job.id)).state is JobState.FINISHED


async def test_renewed_lease_stays_alive(service, pool, board):
    await queue_test_jobs(service, 2)
    renewed, neglected = await claim(pool, lease_s=0.3)
    await asyncio.sleep(0.15)
    held = await job_store.renew_leases(pool, owner=OWNER, job_ids=[renewed.id], lease_s=60)
    assert held == {renewed.id}
    await asyncio.sleep(0.25)  # past the first lease
    assert [j.id for j in await take_over(pool, "CPU")] == [neglected.id]
    assert (await job_store.get_job(pool, renewed.id)).lease_owner == OWNER
    assert (await job_store.get_job(pool, neglected.id)).lease_owner == OTHER_OWNER


async def test_renew_returns_only_the_ids_still_held(service, pool, board):
    await queue_test_jobs(service, 5)
    mine = await claim(pool, limit=2)
    theirs = await claim(pool, owner=OTHER_OWNER, limit=1)
    done = (await claim(pool, limit=1))[0]
    assert await record(pool, done, True, None)
    released = (await claim(pool, limit=1))[0]
    await job_store.release(pool, job_id=released.id, owner=OWNER, error="gone", retry=True)
    asked = [j.id for j in mine] + [theirs[0].id, done.id, released.id, 999_999]
    held = await job_store.renew_leases(pool, owner=OWNER, job_ids=asked, lease_s=60)
    assert held == {j.id for j in mine}
    assert await job_store.renew_leases(pool, owner=OWNER, job_ids=[], lease_s=60) == set()
    dispatched = await dispatch(pool, mine[0])
    assert await job_store.renew_leases(pool, owner=OWNER, job_ids=[dispatched.id], lease_s=60) == {
        dispatched.id
    }


# --- external ids, dispatch and release -------------------------------------------------------


async def test_set_external_id_only_while_claimed_by_the_owner(service, pool, board):
    [receipt] = await queue_test_jobs(service, 1)
    queued = receipt.jobs[0]
    args = {"launcher": "fake", "external_id": "run-1"}
    assert not await job_store.set_external_id(pool, job_id=queued.id, owner=OWNER, **args)
    [job] = await claim(pool)
    assert not await job_store.set_external_id(pool, job_id=job.id, owner=OTHER_OWNER, **args)
    assert not await job_store.set_external_id(pool, job_id=999_999, owner=OWNER, **args)
    assert await job_store.set_external_id(pool, job_id=job.id, owner=OWNER, **args)
    fresh = await job_store.get_job(pool, job.id)
    assert (fresh.launcher, fresh.external_id) == ("fake", "run-1")
    assert await job_store.mark_dispatched(pool, job_id=job.id, owner=OWNER)
    # Once dispatched, the external id is fixed.
    assert not await job_store.set_external_id(
        pool, job_id=job.id, owner=OWNER, launcher="other", external_id="run-2"
    )
    fresh = await job_store.get_job(pool, job.id)
    assert (fresh.state, fresh.external_id) == (JobState.DISPATCHED, "run-1")
    assert fresh.dispatched_at is not None


async def test_mark_dispatched_keeps_the_first_dispatch_time(service, pool, board):
    await queue_test_jobs(service, 1)
    [job] = await claim(pool)
    assert not await job_store.mark_dispatched(pool, job_id=job.id, owner=OTHER_OWNER)
    assert await job_store.mark_dispatched(pool, job_id=job.id, owner=OWNER)
    first = (await job_store.get_job(pool, job.id)).dispatched_at
    await asyncio.sleep(0.01)
    assert await job_store.mark_dispatched(pool, job_id=job.id, owner=OWNER)
    assert (await job_store.get_job(pool, job.id)).dispatched_at == first


async def test_release_with_retry_requeues(service, pool, board):
    await queue_test_jobs(service, 1)
    [job] = await claim(pool)
    job = await dispatch(pool, job)
    state = await job_store.release(
        pool, job_id=job.id, owner=OWNER, error="launcher hiccup", retry=True
    )
    assert state is JobState.QUEUED
    fresh = await job_store.get_job(pool, job.id)
    assert fresh.state is JobState.QUEUED
    assert fresh.external_id is None
    assert fresh.launcher is None
    assert fresh.lease_owner is None
    assert fresh.attempts == 1
    assert fresh.error == "launcher hiccup"
    assert await queue_order.queue_position(pool, job.id) == 1
    # Claimed again: a new attempt.
    [again] = await claim(pool, owner=OTHER_OWNER)
    assert again.id == job.id
    assert again.attempts == 2
    assert again.lease_owner == OTHER_OWNER


async def test_retried_job_gets_a_fresh_dispatch_time(service, pool, board):
    await queue_test_jobs(service, 1)
    [job] = await claim(pool)
    first = (await dispatch(pool, job)).dispatched_at
    assert first is not None
    await job_store.release(pool, job_id=job.id, owner=OWNER, error="lost", retry=True)
    assert (await job_store.get_job(pool, job.id)).dispatched_at is None
    [again] = await claim(pool)
    assert again.dispatched_at is None
    assert (await dispatch(pool, again)).dispatched_at > first


async def test_release_without_retry_fails_the_job(service, pool, board):
    await queue_test_jobs(service, 1)
    [job] = await claim(pool)
    job = await dispatch(pool, job)
    state = await job_store.release(pool, job_id=job.id, owner=OWNER, error="lost", retry=False)
    assert state is JobState.FAILED
    fresh = await job_store.get_job(pool, job.id)
    assert fresh.state is JobState.FAILED
    assert fresh.error == "lost"
    assert fresh.lease_owner is None
    assert fresh.external_id == f"ext-{job.id}"  # kept for the record
    assert fresh.attempts == 1
    assert await queue_order.queue_position(pool, job.id) is None
    assert await claim(pool) == []
    # A failed job cannot be released, finished or recorded any more.
    assert await job_store.release(pool, job_id=job.id, owner=OWNER, error="x", retry=True) is None
    assert not await record(pool, job, True, 1.0)
    assert await count_rows(pool, "runs") == {"runs": 0}


async def test_release_with_a_nul_character_in_the_error(service, pool, board):
    await queue_test_jobs(service, 1)
    [job] = await claim(pool)
    state = await job_store.release(
        pool, job_id=job.id, owner=OWNER, error="runner said: \x00", retry=False
    )
    assert state is JobState.FAILED
    assert (await job_store.get_job(pool, job.id)).state is JobState.FAILED


async def test_release_of_a_queued_job_does_nothing(service, pool, board):
    [receipt] = await queue_test_jobs(service, 1)
    job = receipt.jobs[0]
    assert await job_store.release(pool, job_id=job.id, owner=OWNER, error="x", retry=False) is None
    assert (await job_store.get_job(pool, job.id)).state is JobState.QUEUED


# --- positions, listing ----------------------------------------------------------------------


async def test_queue_position_per_gpu(service, pool, board):
    receipts = await queue_test_jobs(service, 3, gpus=("CPU", "H100"))
    cpu = [next(j for j in r.jobs if j.gpu == "CPU") for r in receipts]
    h100 = [next(j for j in r.jobs if j.gpu == "H100") for r in receipts]
    assert [await queue_order.queue_position(pool, j.id) for j in cpu] == [1, 2, 3]
    assert [await queue_order.queue_position(pool, j.id) for j in h100] == [1, 2, 3]
    [first] = await claim(pool, "CPU", limit=1)
    assert first.id == cpu[0].id
    assert [await queue_order.queue_position(pool, j.id) for j in cpu] == [None, 1, 2]
    assert [await queue_order.queue_position(pool, j.id) for j in h100] == [1, 2, 3]
    # Claiming out of order (a CLI serving its own) moves the later ones up.
    await claim(pool, "H100", submission_ids=[receipts[1].submission_id])
    assert [await queue_order.queue_position(pool, j.id) for j in h100] == [1, None, 2]
    assert await queue_order.queue_position(pool, 999_999) is None
    await record(pool, first, True, None)
    assert await queue_order.queue_position(pool, first.id) is None


async def test_jobs_of_submission(service, pool, board):
    one = await submit(service, gpus=["H100", "CPU"])
    two = await submit(service, user=BOB, gpus=["CPU"], mode=Mode.TEST)
    jobs = await job_store.jobs_of_submission(pool, one.submission_id)
    assert [j.id for j in jobs] == sorted(j.id for j in one.jobs)
    assert {(j.gpu, j.secret) for j in jobs} == {
        ("CPU", False),
        ("CPU", True),
        ("H100", False),
        ("H100", True),
    }
    assert all(j.submission_id == one.submission_id for j in jobs)
    [only] = await job_store.jobs_of_submission(pool, two.submission_id)
    assert (only.gpu, only.mode, only.secret) == ("CPU", Mode.TEST, False)
    assert await job_store.jobs_of_submission(pool, 999_999) == []
    # Reflects later state changes.
    [claimed] = await claim(pool, "CPU", submission_ids=[two.submission_id])
    [only] = await job_store.jobs_of_submission(pool, two.submission_id)
    assert only.state is JobState.CLAIMED
    assert only == claimed


@pytest.mark.reliability(
    "Faults",
    "a leaderboard is deleted while its jobs are claimed and dispatched",
    "the worker's record, release and renew are refused; the GPU slots are free again",
)
async def test_jobs_of_a_deleted_leaderboard_are_gone_for_their_worker(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    public, secret = await claim(pool, limit=2)
    public = await dispatch(pool, public)
    await service.leaderboards.delete("board")
    assert await job_store.get_job(pool, public.id) is None
    assert not await record(pool, public, True, 1.0)
    assert (
        await job_store.release(pool, job_id=secret.id, owner=OWNER, error="x", retry=True) is None
    )
    assert await job_store.renew_leases(pool, owner=OWNER, job_ids=[public.id], lease_s=60) == set()
    assert await job_store.jobs_of_submission(pool, receipt.submission_id) == []
    assert await count_rows(pool, "jobs", "runs") == {"jobs": 0, "runs": 0}
    # The slots are free again for other leaderboards.
    await make_board(service, "next", gpus=["CPU"])
    await submit(service, "next", gpus=["CPU"])
    assert len(await claim(pool, max_active=2)) == 2
