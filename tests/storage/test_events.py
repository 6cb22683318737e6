"""Watching a submission: its current state first, then its own events, until every job ended."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from cluster_manager.core.records import JobEvent, JobState
from cluster_manager.service import NotFoundError, Submitter, events
from cluster_manager.storage import jobs as job_store
from tests.storage.helpers import (
    BOB,
    OWNER,
    board_with_submission,
    claim_submission,
    finish_job,
    finish_submission,
    make_board,
    submit,
)


async def next_event(watch: AsyncIterator[JobEvent], timeout: float = 30) -> JobEvent:
    return await asyncio.wait_for(anext(watch), timeout)


async def rest_of(watch: AsyncIterator[JobEvent], timeout: float = 15) -> list[JobEvent]:
    async def drain() -> list[JobEvent]:
        return [event async for event in watch]

    return await asyncio.wait_for(drain(), timeout)


@pytest.fixture
def no_rereads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watches re-read the database only after a minute: a test ending well within that was
    ended by the notifications, however slowly a busy machine delivers them."""
    monkeypatch.setattr(events, "RECHECK_S", 60)


def finished(job, verdict: str | None = "passed") -> JobEvent:
    return JobEvent(job.id, job.submission_id, job.gpu, job.secret, "finished", verdict=verdict)


async def test_watch_yields_the_state_then_own_events_until_done(service, pool, no_rereads):
    await make_board(service)
    other = await submit(service, user=BOB)  # two CPU jobs ahead of ours
    receipt = await submit(service)
    public, secret = sorted(receipt.jobs, key=lambda j: j.id)
    watch = service.events.watch(receipt.submission_id)
    try:
        assert await next_event(watch) == JobEvent(
            public.id, receipt.submission_id, "CPU", False, "queued", position=3
        )
        assert await next_event(watch) == JobEvent(
            secret.id, receipt.submission_id, "CPU", True, "queued", position=4
        )
        # Another submission's events are not ours: the next event we get is our own.
        for job in other.jobs:
            await job_store.publish(
                pool, JobEvent(job.id, other.submission_id, "CPU", job.secret, "running")
            )
        running = JobEvent(
            public.id, receipt.submission_id, "CPU", False, "running", detail="test: 3 case(s)"
        )
        await job_store.publish(pool, running)
        assert await next_event(watch) == running

        assert await finish_job(pool, public, True, 1.0)
        await job_store.publish(pool, finished(public))
        await job_store.publish(pool, finished(other.jobs[0]))
        assert await next_event(watch) == finished(public)

        # The last job ends: the watch ends with it, without waiting for a re-read.
        assert await finish_job(pool, secret, True, 1.0)
        await job_store.publish(pool, finished(secret))
        assert await rest_of(watch, timeout=30) == [finished(secret)]
    finally:
        await watch.aclose()


@pytest.mark.reliability(
    "Faults",
    "every job of a watched submission ends, but no notification is ever published",
    "the watch re-reads the database and ends with each job's real outcome within 9 s",
)
async def test_watch_ends_by_rereading_when_the_notification_is_missed(
    service, pool, record_property
):
    _, receipt = await board_with_submission(service, gpus=["CPU", "H100"])
    jobs = sorted(receipt.jobs, key=lambda j: j.id)
    watch = service.events.watch(receipt.submission_id)
    try:
        snapshot = [await next_event(watch) for _ in jobs]
        assert [(e.job_id, e.state, e.position) for e in snapshot] == [
            (jobs[0].id, "queued", 1),
            (jobs[1].id, "queued", 2),
            (jobs[2].id, "queued", 1),
            (jobs[3].id, "queued", 2),
        ]
        # Everything ends in the database only; nobody publishes a word about it.
        claimed = await claim_submission(pool, receipt.submission_id)
        cpu_public = claimed[("CPU", False)]
        await job_store.release(
            pool, job_id=cpu_public.id, owner=OWNER, error="launcher gone", retry=False
        )
        for key, job in claimed.items():
            if key != ("CPU", False):
                assert await finish_job(pool, job, True, 1.0)
        began = time.monotonic()
        events = await rest_of(watch, timeout=15)
        took = time.monotonic() - began
        record_property(
            "observed",
            f"ended after {took:.1f} s with {sorted(e.verdict or e.state for e in events)}",
        )
        assert took < 9
    finally:
        await watch.aclose()
    assert sorted(events, key=lambda e: e.job_id) == [
        JobEvent(jobs[0].id, receipt.submission_id, "CPU", False, "failed", "launcher gone"),
        JobEvent(jobs[1].id, receipt.submission_id, "CPU", True, "finished", verdict="passed"),
        JobEvent(jobs[2].id, receipt.submission_id, "H100", False, "finished", verdict="passed"),
        JobEvent(jobs[3].id, receipt.submission_id, "H100", True, "finished", verdict="passed"),
    ]


async def test_watch_of_a_finished_submission_ends_at_once(service, pool, no_rereads):
    _, receipt = await board_with_submission(service)
    await finish_submission(pool, receipt, 1.0, secret_passed=False)
    events = await rest_of(service.events.watch(receipt.submission_id), timeout=30)
    by_secret = {e.secret: e for e in events}
    assert len(events) == 2
    assert (by_secret[False].state, by_secret[False].verdict) == ("finished", "passed")
    # A secret run's author sees that it failed, not how.
    assert (by_secret[True].state, by_secret[True].verdict) == ("finished", "failed")
    assert all(e.position is None for e in events)


async def test_watch_of_several_submissions(service, pool):
    await make_board(service)
    first = await submit(service)
    second = await submit(service, user=BOB)
    await finish_submission(pool, first, 1.0)
    watch = service.events.watch(first.submission_id, second.submission_id)
    try:
        snapshot = [await next_event(watch) for _ in range(4)]
        assert [(e.submission_id, e.state) for e in snapshot] == [
            (first.submission_id, "finished"),
            (first.submission_id, "finished"),
            (second.submission_id, "queued"),
            (second.submission_id, "queued"),
        ]
        assert [e.position for e in snapshot[2:]] == [1, 2]
        for job in second.jobs:
            assert await finish_job(pool, job, True, 2.0)
            await job_store.publish(pool, finished(job))
        assert await rest_of(watch, timeout=4) == [
            finished(j) for j in sorted(second.jobs, key=lambda j: j.id)
        ]
    finally:
        await watch.aclose()


async def test_failed_event_ends_the_watch(service, pool):
    _, receipt = await board_with_submission(service)
    watch = service.events.watch(receipt.submission_id)
    try:
        for _ in receipt.jobs:
            assert (await next_event(watch)).state == "queued"
        claimed = await claim_submission(pool, receipt.submission_id)
        for job in claimed.values():
            state = await job_store.release(
                pool, job_id=job.id, owner=OWNER, error="gave up", retry=False
            )
            assert state is JobState.FAILED
            await job_store.publish(
                pool,
                JobEvent(job.id, job.submission_id, job.gpu, job.secret, "failed", "gave up"),
            )
        events = await rest_of(watch, timeout=4)
        # The secret job's author learns that it failed, not why.
        shown = {e.secret: (e.state, e.detail) for e in events}
        assert shown == {False: ("failed", "gave up"), True: ("failed", "")}
    finally:
        await watch.aclose()


async def test_watch_of_an_unknown_submission_is_not_found(service):
    await make_board(service)
    with pytest.raises(NotFoundError):
        await next_event(service.events.watch(999_999))


@pytest.mark.reliability(
    "Faults",
    "watches abandoned early, more of them than the pool has connections",
    "no connection leaks: the pool still answers at once",
)
async def test_closing_a_watch_early_gives_its_connection_back(service, pool):
    _, receipt = await board_with_submission(service)
    for _ in range(pool.get_max_size() + 2):
        watch = service.events.watch(receipt.submission_id)
        await next_event(watch)
        await watch.aclose()
    # Still usable: no connection was leaked by the abandoned watches.
    assert await asyncio.wait_for(pool.fetchval("SELECT 1"), 5) == 1


async def listener_pids(pool) -> list[int]:
    rows = await pool.fetch(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND query ILIKE 'LISTEN%'"
    )
    return [r["pid"] for r in rows]


async def test_many_watches_share_one_listening_connection(db_url, registry, clock, no_rereads):
    """50 followers on a pool of 3 connections: each watch holds none while it waits."""
    from cluster_manager.service import Service
    from cluster_manager.storage.database import create_pool

    pool = await create_pool(db_url, max_size=3)
    try:
        service = Service(pool, registry, clock=clock)
        await make_board(service)
        receipts = [await submit(service, user=Submitter(f"u{i}", f"u{i}")) for i in range(50)]
        watches = [service.events.watch(r.submission_id) for r in receipts]
        firsts = await asyncio.wait_for(asyncio.gather(*(anext(w) for w in watches)), 30)
        assert {e.state for e in firsts} == {"queued"}
        assert len(await listener_pids(pool)) == 1
        for receipt in receipts:
            await finish_submission(pool, receipt, 1.0)
            for job in receipt.jobs:
                await job_store.publish(pool, finished(job))
        rests = await asyncio.gather(*(rest_of(w, timeout=30) for w in watches))
        for events, receipt in zip(rests, receipts, strict=True):
            ended = {e.job_id for e in events if e.state == "finished"}
            assert ended == {j.id for j in receipt.jobs}
    finally:
        for watch in watches:
            await watch.aclose()
        await pool.close()


async def test_a_lost_listener_is_started_again(service, pool):
    _, first_receipt = await board_with_submission(service)
    second_receipt = await submit(service, user=BOB)
    first_watch = service.events.watch(first_receipt.submission_id)
    second_watch = service.events.watch(second_receipt.submission_id)
    try:
        for watch, receipt in ((first_watch, first_receipt), (second_watch, second_receipt)):
            for _ in receipt.jobs:
                await next_event(watch)
        (lost,) = await listener_pids(pool)
        await pool.execute("SELECT pg_terminate_backend($1)", lost)
        await finish_submission(pool, first_receipt, 1.0)  # unannounced: found by the re-read
        events = await rest_of(first_watch, timeout=15)
        assert {e.state for e in events} == {"finished"}
        # The re-read started a new listener, which the open watch now hears from.
        (new,) = await listener_pids(pool)
        assert new != lost
        await finish_submission(pool, second_receipt, 1.0)
        for job in second_receipt.jobs:
            await job_store.publish(pool, finished(job))
        began = time.monotonic()
        assert {e.state for e in await rest_of(second_watch)} == {"finished"}
        assert time.monotonic() - began < 4
    finally:
        await first_watch.aclose()
        await second_watch.aclose()


@pytest.mark.parametrize("turns", range(6))
async def test_a_watch_cancelled_as_an_event_reaches_it_ends(service, no_rereads, turns):
    """A follow is cancelled when its front end stops (a bot closing, a client leaving): the
    cancellation ends the watch whatever moment the next event reaches it, even in the same
    turn of the loop (`asyncio.wait_for` lost such a cancellation on Python 3.11, and a
    closed bot's follow then ran on to the run's end)."""
    await make_board(service)
    receipt = await submit(service)
    job = min(receipt.jobs, key=lambda j: j.id)
    seen: list[JobEvent] = []

    async def follow() -> None:
        async for event in service.events.watch(receipt.submission_id):
            seen.append(event)

    task = asyncio.create_task(follow())
    while len(seen) < len(receipt.jobs):  # the snapshots: the watch now waits for events
        await asyncio.sleep(0.01)
    running = JobEvent(job.id, receipt.submission_id, "CPU", False, "running")
    # As the listener's connection hands a notification over.
    service.events.event_hub._dispatch(None, 0, "", json.dumps(running.to_json()))
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    assert task in done and task.cancelled(), f"the watch went on after its cancel: {seen}"
