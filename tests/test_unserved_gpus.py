"""GPU types nothing in the deployment runs: refused when a leaderboard lists them, left out
when a problem set is synced, and a job queued on one fails with why instead of waiting for
good; schedulers say which types they run, and a restart of one fails nothing."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from cluster_manager.app import open_app
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.core.records import EventState, Job, JobEvent, JobState
from cluster_manager.rendering.reports import format_submission_report
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import GpuNotServedError, Service, Submitter
from cluster_manager.service.problem_sets import load_problem_set
from cluster_manager.settings import Settings
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import served as served_store
from tests.conftest import CORRECT, EXAMPLES, load_task, write_task
from tests.support.fakes import FakeLauncher

NO_MODAL = "H100 runs on the modal launcher, which this deployment has not configured: set "
NO_MODAL += "CLUSTER_MANAGER_MODAL_APP"
WINDOW = 1.0  # the served window, a minute in production
CONFIG = SchedulerConfig(
    lease_s=5, heartbeat_s=0.5, poll_s=0.05, served_window_s=WINDOW, unserved_check_s=0.05
)
# The scheduler under test has the fake launcher only: it runs CPU, never H100.
REGISTRY = GpuRegistry(
    {
        "CPU": GpuType("CPU", "fake", max_concurrent=2),
        "H100": GpuType("H100", "modal", params={"modal_gpu": "H100"}),
    }
)


async def test_a_board_on_a_gpu_type_nothing_here_runs_is_refused_naming_the_setting(
    db_url: str, tmp_path: Path
):
    settings = Settings(database_url=db_url, data_dir=tmp_path / "data")
    task = load_task(write_task(tmp_path / "task"))
    deadline = datetime.now(UTC) + timedelta(days=1)
    async with open_app(settings) as app:
        with pytest.raises(GpuNotServedError) as refused:
            await app.service.leaderboards.create("b", task, deadline, ["CPU", "H100"])
        assert NO_MODAL in str(refused.value)
        assert await app.service.leaderboards.all() == []
        # A worker elsewhere that has Modal's credentials says it runs H100: allowed then.
        await served_store.register(app.pool, "modal-worker", ["H100"])
        board = await app.service.leaderboards.create("b", task, deadline, ["CPU", "H100"])
        assert board.gpus == ("CPU", "H100")


async def test_a_sync_leaves_out_the_gpu_types_nothing_here_runs(db_url: str, tmp_path: Path):
    root = tmp_path / "problems"
    shutil.copytree(EXAMPLES, root / "set")
    (root / "season.yaml").write_text(
        "name: Season\ndeadline: '2099-01-01'\nproblems:\n"
        "  - {directory: set/identity_py, name: both, gpus: [CPU, H100]}\n"
        "  - {directory: set/identity_py, name: modal-only, gpus: [H100, TPU]}\n"
    )
    settings = Settings(database_url=db_url, data_dir=tmp_path / "data")
    async with open_app(settings) as app:
        unserved = await app.service.leaderboards.gpus_not_served()
        loaded = load_problem_set(root / "season.yaml", app.registry, unserved)
        plan = await app.service.problem_sets.sync(loaded.problems, skipped=loaded.skipped)
        (item,) = plan.items
        assert item.spec.name == "both" and item.spec.gpus == ("CPU",)
        assert item.notes == (f"GPU type H100 is not served here ({NO_MODAL}): left out",)
        assert plan.skipped == (
            f"modal-only: none of its GPU types is served here ({NO_MODAL}; "
            "TPU is not configured here)",
        )
        assert (await app.service.leaderboards.get("both")).gpus == ("CPU",)


@pytest.fixture
async def board(pool: asyncpg.Pool, clock, tmp_path: Path) -> Service:
    service = Service(pool, REGISTRY, clock=clock)
    task = load_task(write_task(tmp_path / "t"))
    await service.leaderboards.create("board", task, clock.now + timedelta(days=1), ["CPU", "H100"])
    return service


async def submit_on_h100(service: Service) -> int:
    receipt = await service.submissions.submit(
        "board",
        Submitter("alice", "alice"),
        "s.py",
        CORRECT.encode(),
        gpus=["H100"],
        mode=Mode.TEST,
    )
    return receipt.submission_id


@pytest.fixture
async def scheduler(pool: asyncpg.Pool) -> AsyncIterator[Scheduler]:
    """A whole-queue scheduler that runs CPU only, as a deployment without Modal has."""
    scheduler = Scheduler(pool, REGISTRY, {"fake": FakeLauncher()}, config=CONFIG)
    stop = asyncio.Event()
    running = asyncio.create_task(scheduler.run(stop))
    yield scheduler
    stop.set()
    await asyncio.wait_for(running, 10)


async def until_failed(pool: asyncpg.Pool, submission_id: int, timeout: float = 20) -> Job:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        (job,) = await job_store.jobs_of_submission(pool, submission_id)
        if job.state is JobState.FAILED or asyncio.get_running_loop().time() > deadline:
            assert job.state is JobState.FAILED, job.state
            return job
        await asyncio.sleep(0.05)


async def events_until_done(service: Service, submission_id: int) -> list[JobEvent]:
    return [event async for event in service.events.watch(submission_id)]


@pytest.mark.reliability(
    "Faults",
    "a submission to a GPU type whose launcher no server of the deployment has (H100 on "
    "Modal, no Modal credentials)",
    "its job fails once it has waited the window, saying nothing runs H100 and what would; "
    "report and live events show it",
)
async def test_a_job_queued_on_a_gpu_type_nothing_runs_fails_with_why(
    pool: asyncpg.Pool, board: Service, scheduler: Scheduler, record_property
):
    loop = asyncio.get_running_loop()
    submission_id = await submit_on_h100(board)
    watching = asyncio.create_task(events_until_done(board, submission_id))
    started = loop.time()
    job = await until_failed(pool, submission_id)
    waited = loop.time() - started
    events = await asyncio.wait_for(watching, 10)
    report = await board.submissions.report(submission_id)
    record_property("observed", f"failed after {waited:.1f} s (window {WINDOW:g} s): {job.error}")
    assert waited >= WINDOW
    assert job.error is not None
    assert job.error.startswith("no server of this deployment runs H100 jobs (its launcher: modal")
    assert "CLUSTER_MANAGER_MODAL_APP" in job.error
    assert report.done and not report.passed
    assert f"[H100] ❌ failed: {job.error}" in format_submission_report(report)
    assert (events[-1].state, events[-1].detail) == (EventState.FAILED, job.error)


async def test_a_job_waits_while_a_scheduler_elsewhere_runs_its_type_even_through_a_restart(
    pool: asyncpg.Pool, board: Service, scheduler: Scheduler
):
    loop = asyncio.get_running_loop()
    submission_id = await submit_on_h100(board)

    async def other_worker_beats(seconds: float) -> None:
        """A worker with Modal's credentials, elsewhere: its heartbeat says it runs H100."""
        end = loop.time() + seconds
        while loop.time() < end:
            await served_store.register(pool, "modal-worker", ["H100"])
            await asyncio.sleep(0.1)

    async def state() -> JobState:
        (job,) = await job_store.jobs_of_submission(pool, submission_id)
        return job.state

    await other_worker_beats(2 * WINDOW)
    assert await state() is JobState.QUEUED
    await served_store.unregister(pool, "modal-worker")  # a clean stop, then a restart
    await asyncio.sleep(WINDOW / 4)
    await other_worker_beats(2 * WINDOW)
    assert await state() is JobState.QUEUED
    # The worker dies: its rows age out, and the job fails.
    job = await until_failed(pool, submission_id)
    assert job.error is not None and "runs H100 jobs" in job.error


async def test_whole_queue_schedulers_say_what_they_run_and_a_cli_one_does_not(
    pool: asyncpg.Pool,
):
    both = {"fake": FakeLauncher(), "modal": FakeLauncher(name="modal")}
    cli = Scheduler(pool, REGISTRY, both, config=CONFIG, submission_ids={1})
    whole = Scheduler(pool, REGISTRY, {"fake": FakeLauncher()}, config=CONFIG)
    stop = asyncio.Event()
    running = [asyncio.create_task(s.run(stop)) for s in (cli, whole)]
    try:
        for _ in range(100):
            if await served_store.served_gpus(pool):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(CONFIG.heartbeat_s)  # a heartbeat or two later
        assert await served_store.served_gpus(pool) == ["CPU"]
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*running), 10)
    # Stopped cleanly: it runs nothing any more.
    assert await pool.fetchval("SELECT count(*) FROM served_gpus") == 0
