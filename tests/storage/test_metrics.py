"""The figures /metrics exposes, read from jobs driven to each way a job can end."""

from __future__ import annotations

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import metrics as metrics_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import served as served_store
from cluster_manager.storage import unserved
from cluster_manager.storage.metrics import RUN_SECONDS_BUCKETS, EndedJobs
from tests.storage.helpers import (
    OWNER,
    claim_submission,
    dispatch,
    make_board,
    record,
    run_result,
    submit,
)


async def test_each_ended_job_counts_once_under_how_it_ended(service, pool):
    await make_board(service, gpus=("CPU", "H100"))

    async def claimed():
        receipt = await submit(service, gpus=["CPU"], mode=Mode.TEST)
        return (await claim_submission(pool, receipt.submission_id))[("CPU", False)]

    async def give_up(job):
        await job_store.release(pool, job_id=job.id, owner=OWNER, error="gave up", retry=False)

    finished, refused, lost = await claimed(), await claimed(), await claimed()
    for job in (finished, refused, lost):
        await job_store.set_external_id(
            pool, job_id=job.id, owner=OWNER, launcher="fake", external_id=f"ext-{job.id}"
        )
    for job in (finished, lost):
        await job_store.mark_dispatched(pool, job_id=job.id, owner=OWNER)
    fresh = await job_store.get_job(pool, finished.id)
    assert await record(pool, fresh, passed=False, verdict=Verdict.WRONG_ANSWER)
    await give_up(refused)  # its launcher never took it: a dispatch error
    await give_up(lost)  # dispatched, then given up: lost
    await submit(service, gpus=["CPU"], mode=Mode.TEST)
    failed = await unserved.fail_jobs(pool, gpu="CPU", error="nothing runs CPU", window_s=0)
    assert len(failed) == 1
    await submit(service, gpus=["CPU"], mode=Mode.TEST)  # still queued

    figures = await metrics_store.figures(pool)
    assert sorted(figures.ended, key=lambda e: e.outcome) == [
        EndedJobs("CPU", "fake", "dispatch_error", 1),
        EndedJobs("CPU", "fake", "lost", 1),
        EndedJobs("CPU", "", "not_dispatched", 1),
        EndedJobs("CPU", "fake", "wrong_answer", 1),
    ]
    (run,) = figures.run_seconds
    assert run.gpu == "CPU" and run.count == 1 and 0 <= run.total_s < 60
    assert len(run.buckets) == len(RUN_SECONDS_BUCKETS)
    assert run.buckets[-1] == 1  # cumulative: the widest bucket holds it
    loads = {load.gpu: load for load in figures.gpus}
    assert set(loads) == {"CPU", "H100"}
    assert (loads["CPU"].queued, loads["CPU"].in_flight) == (1, 0)
    assert loads["CPU"].oldest_wait_s >= 0 and loads["H100"].oldest_wait_s == 0
    assert loads["CPU"].open_leaderboards == 1 and loads["CPU"].schedulers == 0
    assert figures.schedulers == 0


async def test_live_schedulers_count_per_gpu_type_and_in_all(service, pool):
    await make_board(service, gpus=("CPU",))
    await served_store.register(pool, "worker-a", ["CPU", "H100"])
    await served_store.register(pool, "worker-b", ["CPU"])
    figures = await metrics_store.figures(pool)
    assert {load.gpu: load.schedulers for load in figures.gpus} == {"CPU": 2, "H100": 1}
    # A type only a scheduler serves shows too; no open leaderboard runs on it.
    assert {load.gpu: load.open_leaderboards for load in figures.gpus} == {"CPU": 1, "H100": 0}
    assert figures.schedulers == 2
    await served_store.unregister(pool, "worker-a")
    assert await metrics_store.live_schedulers(pool) == 1


async def test_each_run_counts_in_every_bucket_at_or_above_its_seconds(service, pool):
    await make_board(service, gpus=("CPU",))
    for seconds in (1.0, 1.5, 4000.0):
        receipt = await submit(service, gpus=["CPU"], mode=Mode.TEST)
        job = await dispatch(
            pool, (await claim_submission(pool, receipt.submission_id))["CPU", False]
        )
        async with pool.acquire() as conn, conn.transaction():
            # now() is the transaction's start, so the run took exactly `seconds`.
            await conn.execute(
                "UPDATE jobs SET dispatched_at = now() - make_interval(secs => $2) WHERE id = $1",
                job.id,
                seconds,
            )
            result = run_result(mode=Mode.TEST)
            assert await run_store.record_run(conn, job=job, owner=OWNER, result=result)
    (run,) = await metrics_store.run_seconds(pool)
    assert (run.gpu, run.count, run.total_s) == ("CPU", 3, 4002.5)
    bounds = dict(zip(RUN_SECONDS_BUCKETS, run.buckets, strict=True))
    # A bound holds the runs of at most its seconds: exactly 1 s is under the 1 s bound.
    assert (bounds[1.0], bounds[2.0], bounds[3600.0]) == (1, 2, 2)
