"""A ranked run whose GPU throttled: its score is stored but not ranked, with the reason, and
its ranked pair is retried once, as a new generation of its jobs; a throttled retry stays
stored-not-ranked and is not retried again."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import asyncpg

from cluster_manager.core.records import Job, JobEvent, JobState
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.telemetry import PhaseTelemetry, Spread
from cluster_manager.storage import history as history_store
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import runs as run_store
from tests.storage.helpers import (
    ALICE,
    OWNER,
    claim_submission,
    dispatch,
    make_board,
    run_result,
    submit,
)

HOLD = "not ranked: the GPU throttled in 12 % of the samples (thermal); the run is retried once"


def sampled(score: float, throttled_share: float) -> RunResult:
    ranked = PhaseTelemetry(
        probe="NVML",
        device="H100",
        samples=143,
        interval_s=0.05,
        quantities={"sm_clock_mhz": Spread(1755, 1900, 1980)},
        throttled_share=throttled_share,
        reasons=("hw_thermal_slowdown",) if throttled_share else (),
    )
    return dataclasses.replace(run_result(True, score), telemetry={"leaderboard": ranked})


async def finish(pool: asyncpg.Pool, job: Job, result: RunResult) -> None:
    fresh = await job_store.get_job(pool, job.id)
    assert fresh is not None
    if fresh.state is JobState.QUEUED:
        fresh = (await claim_submission(pool, job.submission_id))[(job.gpu, job.secret)]
    fresh = await dispatch(pool, fresh)
    async with pool.acquire() as conn:
        assert await run_store.record_run(
            conn, job=fresh, owner=OWNER, result=result, throttle_threshold=0.05
        )


async def pair(pool: asyncpg.Pool, submission_id: int) -> dict[bool, Job]:
    """The submission's queued ranked pair, by `secret`."""
    jobs = await job_store.jobs_of_submission(pool, submission_id)
    return {j.secret: j for j in jobs if j.state is JobState.QUEUED}


async def standing(service) -> list[tuple[str, float]]:
    return [(e.user, e.score) for e in (await service.leaderboards.ranking("board", "CPU"))["CPU"]]


async def test_a_throttled_run_is_stored_not_ranked_and_its_pair_retried_once(service, pool):
    board = await make_board(service)
    receipt = await submit(service, user=ALICE, gpus=["CPU"])
    first = await pair(pool, receipt.submission_id)
    await finish(pool, first[False], sampled(1.0, 0.12))
    await finish(pool, first[True], sampled(1.0, 0.0))

    assert await standing(service) == []
    runs = await run_store.runs_of_submission(pool, receipt.submission_id)
    assert [r.score for r in runs] == [1.0, 1.0]  # stored, with its score
    assert runs[0].result["review"] == HOLD
    assert await service.submissions.ranking_holds(receipt.submission_id) == {"CPU": HOLD}

    retry = await pair(pool, receipt.submission_id)
    assert sorted(retry) == [False, True]  # the whole pair: a score needs both
    await finish(pool, retry[False], sampled(1.5, 0.01))
    assert await standing(service) == []  # half of the retry is in
    await finish(pool, retry[True], sampled(1.5, 0.0))
    assert await standing(service) == [("alice", 1.5)]
    assert await service.submissions.ranking_holds(receipt.submission_id) == {}
    # The retry stands for the submission's own run: its score is in the ranking's history.
    history = await history_store.score_history(pool, leaderboard_id=board.id, gpu="CPU")
    assert [(user, score) for user, score, _ in history] == [("alice", 1.5)]


async def test_a_generation_is_retried_once_and_a_retry_never(service, pool):
    await make_board(service)
    receipt = await submit(service, user=ALICE, gpus=["CPU"])
    first = await pair(pool, receipt.submission_id)
    await finish(pool, first[False], sampled(1.0, 0.5))
    await finish(pool, first[True], sampled(1.0, 0.5))  # both throttled: still one retry
    jobs = await job_store.jobs_of_submission(pool, receipt.submission_id)
    assert len(jobs) == 4

    retry = await pair(pool, receipt.submission_id)
    await finish(pool, retry[False], sampled(1.0, 0.3))
    await finish(pool, retry[True], sampled(1.0, 0.0))
    assert len(await job_store.jobs_of_submission(pool, receipt.submission_id)) == 4
    assert await pair(pool, receipt.submission_id) == {}
    assert await standing(service) == []
    holds = await service.submissions.ranking_holds(receipt.submission_id)
    assert holds == {
        "CPU": "not ranked: the GPU throttled in 30 % of the samples (thermal), also on its retry"
    }


async def test_throttling_up_to_the_threshold_is_ranked_without_a_retry(service, pool):
    await make_board(service)
    receipt = await submit(service, user=ALICE, gpus=["CPU"])
    first = await pair(pool, receipt.submission_id)
    await finish(pool, first[False], sampled(1.0, 0.05))
    await finish(pool, first[True], sampled(1.0, 0.0))
    assert await standing(service) == [("alice", 1.0)]
    assert len(await job_store.jobs_of_submission(pool, receipt.submission_id)) == 2


async def test_a_watch_follows_the_retry_to_its_end(service, pool):
    """Discord's live message and the CLI follow a submission with `watch`: the retry queued
    by the pair's last result is followed too, and the report then says passed."""
    await make_board(service)
    receipt = await submit(service, user=ALICE, gpus=["CPU"])
    first = await pair(pool, receipt.submission_id)
    watch = service.events.watch(receipt.submission_id)
    try:
        assert [(await anext(watch)).state for _ in range(2)] == ["queued", "queued"]
        for job, share in ((first[False], 0.12), (first[True], 0.0)):
            await finish(pool, job, sampled(1.0, share))
            await job_store.publish(pool, finished(job))
            assert await asyncio.wait_for(anext(watch), 10) == finished(job)
        retry = await pair(pool, receipt.submission_id)
        queued = [await asyncio.wait_for(anext(watch), 10) for _ in range(2)]
        assert {(e.job_id, e.state) for e in queued} == {(j.id, "queued") for j in retry.values()}
        report = await service.submissions.report(receipt.submission_id)
        assert not report.done

        for job in retry.values():
            await finish(pool, job, sampled(1.5, 0.0))
            await job_store.publish(pool, finished(job))
        rest = await asyncio.wait_for(_drain(watch), 15)
        assert {e.job_id for e in rest if e.state == "finished"} == {j.id for j in retry.values()}
    finally:
        await watch.aclose()
    report = await service.submissions.report(receipt.submission_id)
    assert report.done and report.passed


async def _drain(watch: AsyncIterator[JobEvent]) -> list[JobEvent]:
    return [event async for event in watch]


def finished(job: Job) -> JobEvent:
    return JobEvent(job.id, job.submission_id, job.gpu, job.secret, "finished", verdict="passed")
