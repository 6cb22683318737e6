"""The scheduler against the real Postgres: claims, dispatch, faults, take-over, exactly once."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import pytest

import cluster_manager.core.phases as plan
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.records import Job, JobEvent, JobState
from cluster_manager.core.run_results import RunResult
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.installation import installation_id
from tests.conftest import CORRECT, load_task, write_task
from tests.support.fakes import SANDBOXED, FakeLauncher, passing

FAST = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.05, max_attempts=3)


@pytest.fixture
def fake_registry() -> GpuRegistry:
    return GpuRegistry({"H100": GpuType("H100", "fake", max_concurrent=2)})


@pytest.fixture
async def board(pool, fake_registry, clock, tmp_path):
    service = Service(pool, fake_registry, clock=clock)
    await service.leaderboards.create(
        "board", load_task(write_task(tmp_path / "t")), clock.now + timedelta(days=1), ["H100"]
    )
    return service


async def submit(service: Service, user: str, mode: Mode = Mode.LEADERBOARD):
    return await service.submissions.submit(
        "board", Submitter(user, user), "s.py", CORRECT.encode(), mode=mode
    )


async def test_ranked_submission_runs_public_and_secret_jobs_and_ranks(pool, board, fake_registry):
    launcher = FakeLauncher(polls=2)
    receipt = await submit(board, "alice")
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 30)

    report = await board.submissions.report(receipt.submission_id)
    assert [j.state for j in report.jobs] == [JobState.FINISHED, JobState.FINISHED]
    assert sorted(r.secret for r in report.runs) == [False, True]
    # Only the secret job's request carries the leaderboard's secret seed.
    requests = {k: r.request for k, r in launcher.runs.items()}
    seeds = sorted((r.secret_seed is not None) for r in requests.values())
    assert seeds == [False, True]
    ranking = await board.leaderboards.ranking("board")
    assert [e.user for e in ranking["H100"]] == ["alice"]
    assert report.done and report.passed
    # Once stored, what each run left on the launcher's side is released.
    assert sorted(launcher.released) == sorted(launcher.runs)


async def test_concurrency_limit_per_gpu_is_never_exceeded(pool, board, fake_registry):
    launcher = FakeLauncher(polls=5)
    receipts = [await submit(board, f"user{i}", Mode.TEST) for i in range(6)]
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    peak = 0

    async def watch_active():
        nonlocal peak
        while True:
            active = await pool.fetchval(
                "SELECT count(*) FROM jobs WHERE state IN ('claimed', 'dispatched')"
            )
            peak = max(peak, active)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch_active())
    job_ids = {j.id for r in receipts for j in r.jobs}
    await asyncio.wait_for(scheduler.run_until_idle(job_ids), 30)
    watcher.cancel()
    assert 1 <= peak <= 2
    assert await pool.fetchval("SELECT count(*) FROM runs") == 6


@pytest.mark.reliability(
    "Faults",
    "the launcher refuses the first 2 dispatches (an outage)",
    "retried under the same key: one run, which passes",
)
async def test_launcher_outage_is_retried_then_succeeds(
    pool, board, fake_registry, record_property
):
    launcher = FakeLauncher(submit_failures=2)
    receipt = await submit(board, "alice", Mode.TEST)
    (job_id,) = (j.id for j in receipt.jobs)
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 30)
    report = await board.submissions.report(receipt.submission_id)
    record_property(
        "observed",
        f"{sum(launcher.submits.values())} submits under {len(launcher.submits)} key; "
        f"run {report.runs[0].verdict.value if report.runs else None}",
    )
    assert report.runs[0].passed
    (key,) = launcher.submits
    assert launcher.submits[key] == 3  # two failures, then the run: one key, one run
    # The key names this installation: no other database sharing the launcher uses it.
    assert key == f"{await installation_id(pool)}-job-{job_id}-attempt-1"


@pytest.mark.reliability(
    "Faults",
    "the launcher is down for good",
    "the job fails after its 3 attempts, with the launcher's error; the submission is failed",
)
async def test_persistent_outage_fails_the_job_after_its_attempts(
    pool, board, fake_registry, record_property
):
    launcher = FakeLauncher(submit_failures=1000)
    receipt = await submit(board, "alice", Mode.TEST)
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 60)
    (job,) = (await board.submissions.report(receipt.submission_id)).jobs
    record_property("observed", f"job {job.state.value} after {job.attempts} attempts: {job.error}")
    assert job.state is JobState.FAILED
    assert job.attempts == FAST.max_attempts
    assert "down" in (job.error or "")
    failed = await board.submissions.report(receipt.submission_id)
    assert failed.done and not failed.passed


@pytest.mark.reliability(
    "Faults",
    "every run is lost by the launcher (it disappears without a result)",
    "dispatched again under a new key each attempt, then the job fails saying the run was lost",
)
async def test_lost_runs_are_dispatched_again_under_a_new_key(
    pool, board, fake_registry, record_property
):
    launcher = FakeLauncher(lose_runs=True)
    receipt = await submit(board, "alice", Mode.TEST)
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 60)
    (job,) = (await board.submissions.report(receipt.submission_id)).jobs
    record_property(
        "observed",
        f"{len(launcher.submits)} keys {sorted(launcher.submits)}; "
        f"job {job.state.value}: {job.error}",
    )
    assert job.state is JobState.FAILED
    assert "lost" in (job.error or "")
    assert len(launcher.submits) == FAST.max_attempts  # one key per attempt
    # Whatever a lost run left on the launcher's side goes too: nothing of it runs any more.
    assert sorted(launcher.released) == sorted(launcher.submits)


async def test_a_run_given_up_on_an_error_is_released_once_it_has_ended(pool, board, fake_registry):
    launcher = FakeLauncher(unreadable_results=True)
    config = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.01, follow_attempts=1)
    receipt = await submit(board, "alice", Mode.TEST)
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=config)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 60)
    (job,) = (await board.submissions.report(receipt.submission_id)).jobs
    assert job.state is JobState.FAILED and "unreadable" in (job.error or "")
    # Each attempt's run had finished: what it left goes, as a stored result's would.
    assert sorted(launcher.released) == sorted(launcher.submits)
    assert len(launcher.released) == config.max_attempts


class SlowReleaseLauncher(FakeLauncher):
    """Its release takes a while: long enough for the scheduler to be stopped meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.releasing = asyncio.Event()

    async def release(self, handle):
        self.releasing.set()
        await asyncio.sleep(0.3)
        await super().release(handle)


async def test_a_scheduler_stopped_while_releasing_a_run_still_releases_it(
    pool, board, fake_registry
):
    launcher = SlowReleaseLauncher()
    receipt = await submit(board, "alice", Mode.TEST)
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    stop = asyncio.Event()
    serving = asyncio.create_task(scheduler.run(stop))
    await asyncio.wait_for(launcher.releasing.wait(), 30)
    stop.set()
    await asyncio.wait_for(serving, 30)
    (job,) = (await board.submissions.report(receipt.submission_id)).jobs
    assert job.state is JobState.FINISHED
    # The stop came after the result was stored: what the run left went all the same.
    assert launcher.released == list(launcher.runs)


@pytest.mark.reliability(
    "Faults",
    "a run that never finishes",
    "a timeout verdict once the run's time is up, and the run is cancelled",
)
async def test_a_run_that_never_finishes_ends_as_a_timeout(
    pool, fake_registry, clock, tmp_path, record_property
):
    service = Service(pool, fake_registry, clock=clock)
    task = load_task(write_task(tmp_path / "t", extra={"test_timeout": 1}))
    await service.leaderboards.create("slow", task, clock.now + timedelta(days=1), ["H100"])
    receipt = await service.submissions.submit(
        "slow", Submitter("a", "a"), "s.py", CORRECT.encode(), mode=Mode.TEST
    )
    launcher = FakeLauncher(polls=10**9)
    config = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.05)
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan, "RUN_OVERHEAD_S", 0.5)  # the run may take test_timeout + 0.5 s
        await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 30)
    report = await service.submissions.report(receipt.submission_id)
    record_property(
        "observed",
        f"{report.runs[0].verdict.value}: {report.runs[0].result.get('message')}; "
        f"cancelled {len(launcher.cancelled)} of {len(launcher.runs)} run",
    )
    assert report.runs[0].verdict is Verdict.TIMEOUT
    assert launcher.cancelled == list(launcher.runs)
    assert launcher.released == list(launcher.runs)


@pytest.mark.reliability(
    "Faults",
    "a scheduler dies after dispatching a job (it stops renewing the lease)",
    "a successor adopts the job, re-attaches to the same run, and records it once",
)
async def test_orphaned_jobs_are_taken_over_and_recorded_once(
    pool, board, fake_registry, record_property, caplog
):
    caplog.set_level(logging.INFO, logger="cluster_manager.scheduling")
    # A scheduler claims and dispatches, then "dies" (stops without finishing).
    launcher = FakeLauncher(polls=10**9)
    receipt = await submit(board, "alice", Mode.TEST)
    config = SchedulerConfig(lease_s=30, heartbeat_s=10, poll_s=0.05)
    dead = Scheduler(pool, fake_registry, {"fake": launcher}, config=config, owner="dead")
    await dead.step()
    job = await _until_dispatched(pool, receipt.submission_id)
    for task in list(dead._tasks.values()):
        task.cancel()
    assert job.lease_owner == "dead"

    # Its successor adopts the job once the lease has expired, and re-attaches to the run.
    await pool.execute("UPDATE jobs SET lease_expires_at = now() - interval '1 second'")
    launcher.polls = 1
    for run in launcher.runs.values():
        run.polls_left = 1
    heir = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST, owner="heir")
    await asyncio.wait_for(heir.run_until_idle({job.id}), 30)
    (job,) = await job_store.jobs_of_submission(pool, receipt.submission_id)
    runs = await pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job.id)
    record_property(
        "observed",
        f"job {job.state.value} by the heir; "
        f"{sum(launcher.submits.values())} dispatch, {runs} run row",
    )
    assert job.state is JobState.FINISHED
    assert sum(launcher.submits.values()) == 1  # never dispatched twice
    assert runs == 1
    # The log follows the job through its owners, by its id.
    assert f"job {job.id}: taken over from scheduler dead," in caplog.text
    assert f"job {job.id}: re-attached to fake run {job.external_id}" in caplog.text
    assert f"job {job.id}: finished, passed," in caplog.text


async def _until_dispatched(pool, submission_id: int, timeout: float = 30) -> Job:
    """The submission's one job once dispatched: the dispatch runs in a task of its own."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        (job,) = await job_store.jobs_of_submission(pool, submission_id)
        if job.state is JobState.DISPATCHED or asyncio.get_running_loop().time() > deadline:
            assert job.state is JobState.DISPATCHED, job.state
            return job
        await asyncio.sleep(0.05)


async def test_result_of_a_failed_run_is_recorded_with_its_verdict(pool, board, fake_registry):
    def wrong(request: RunRequest) -> RunResult:
        return RunResult(False, Verdict.WRONG_ANSWER, request.mode, "test 0 failed")

    launcher = FakeLauncher(outcome=wrong)
    receipt = await submit(board, "alice")
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 30)
    report = await board.submissions.report(receipt.submission_id, admin=True)
    assert {r.verdict for r in report.runs} == {Verdict.WRONG_ANSWER}
    assert (await board.leaderboards.ranking("board"))["H100"] == []


async def test_a_submit_adopts_orphans_of_its_own_gpu_types_only(pool, clock, tmp_path):
    registry = GpuRegistry(
        {"H100": GpuType("H100", "fake", max_concurrent=1), "B200": GpuType("B200", "fake")}
    )
    service = Service(pool, registry, clock=clock)
    task = load_task(write_task(tmp_path / "t"))
    await service.leaderboards.create("two", task, clock.now + timedelta(days=1), ["H100", "B200"])
    orphans = [
        await service.submissions.submit(
            "two", Submitter(u, u), "s.py", CORRECT.encode(), gpus=[g], mode=Mode.TEST
        )
        for u, g in (("dead-h100", "H100"), ("dead-b200", "B200"))
    ]
    launcher = FakeLauncher(polls=10**9)
    dead = Scheduler(pool, registry, {"fake": launcher}, config=FAST, owner="dead")
    await dead.step()
    for task_ in list(dead._tasks.values()):
        task_.cancel()
    await pool.execute("UPDATE jobs SET lease_expires_at = now() - interval '1 second'")
    launcher.polls = 1
    for run in launcher.runs.values():
        run.polls_left = 1

    mine = await service.submissions.submit(
        "two", Submitter("me", "me"), "s.py", CORRECT.encode(), gpus=["H100"], mode=Mode.TEST
    )
    cli = Scheduler(
        pool,
        registry,
        {"fake": launcher},
        config=FAST,
        submission_ids={mine.submission_id},
        gpus={"H100"},
    )
    await asyncio.wait_for(cli.run_until_idle({j.id for j in mine.jobs}), 30)
    states = {
        r.submission_id: [j.state for j in (await service.submissions.report(r.submission_id)).jobs]
        for r in (*orphans, mine)
    }
    done = [JobState.FINISHED]
    assert states[orphans[0].submission_id] == done  # its GPU's orphan: finished first
    assert states[mine.submission_id] == done
    # Another GPU type's orphan is left to whoever serves that type.
    assert JobState.FINISHED not in states[orphans[1].submission_id]


def _secret_tells(request: RunRequest) -> RunResult:
    """A ranked run whose secret re-run has a score and a message of its own."""
    if request.secret_seed is None:
        return passing(request)
    return RunResult(
        True,
        Verdict.PASSED,
        request.mode,
        f"seed-derived detail {request.secret_seed}",
        score=0.007,
        system=SANDBOXED,
    )


@pytest.mark.reliability(
    "Access",
    "a ranked submission whose secret re-run has its own score and message; the author follows "
    "it live, then reads its report and their personal runs",
    "the secret run shows its verdict only: no score, result or message in the events, the "
    "report or the personal runs",
)
async def test_a_secret_runs_score_and_message_reach_no_user(
    pool, board, fake_registry, record_property
):
    launcher = FakeLauncher(outcome=_secret_tells)
    receipt = await submit(board, "alice")
    scheduler = Scheduler(pool, fake_registry, {"fake": launcher}, config=FAST)

    async def follow() -> list[JobEvent]:
        return [e async for e in board.events.watch(receipt.submission_id)]

    events, _ = await asyncio.wait_for(
        asyncio.gather(follow(), scheduler.run_until_idle({j.id for j in receipt.jobs})), 30
    )
    report = await board.submissions.report(receipt.submission_id)
    personal = await board.leaderboards.personal_runs("board", Submitter("alice", "alice"))
    secret = [r for r in (*report.runs, *personal) if r.secret]
    shown = [(r.score, r.result) for r in secret] + [e.detail for e in events if e.secret]
    record_property("observed", f"secret run as shown: {shown}")
    assert len(secret) == 2 and all(r.verdict is Verdict.PASSED for r in secret)
    assert all(r.score is None and r.result == {} for r in secret)
    assert not any("seed-derived" in e.detail for e in events)
    # The public run keeps its score; the ranking takes the worse of the two, the secret's.
    assert [r.score for r in report.runs if not r.secret] == [0.001]
    assert [e.score for e in (await board.leaderboards.ranking("board"))["H100"]] == [0.007]
