"""A launcher's own failures (a full disk, a download that breaks) against the real scheduler:
each is counted and reported as the launcher's, never taken for the database going away."""

from __future__ import annotations

import asyncio
import errno
from datetime import timedelta
from pathlib import Path

import pytest

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.core.records import JobState
from cluster_manager.launchers.base import RunHandle
from cluster_manager.launchers.slurm import SlurmLauncher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from tests.conftest import CORRECT, load_task, write_task
from tests.support.fakes import FakeLauncher

FAST = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.05, max_attempts=2)
SLURM = GpuRegistry({"LAB": GpuType("LAB", "slurm", max_concurrent=2)})
FAKE = GpuRegistry({"H100": GpuType("H100", "fake", max_concurrent=2)})


async def _submit(pool, registry, clock, tmp_path, gpu: str) -> tuple[Service, int, set[int]]:
    service = Service(pool, registry, clock=clock)
    task = load_task(write_task(tmp_path / "task"))
    await service.leaderboards.create("board", task, clock.now + timedelta(days=1), [gpu])
    receipt = await service.submissions.submit(
        "board", Submitter("alice", "alice"), "s.py", CORRECT.encode(), mode=Mode.TEST
    )
    return service, receipt.submission_id, {j.id for j in receipt.jobs}


@pytest.mark.reliability(
    "Faults",
    "the Slurm shared directory is full (ENOSPC on every write of a dispatch)",
    "the job fails after its attempts with the OS error named; dispatches are bounded",
)
async def test_a_full_shared_directory_ends_the_job_after_its_attempts(
    pool, clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_property
):
    launcher = SlurmLauncher(tmp_path / "shared", poll_interval=0.05)
    writes: list[str] = []

    def full(run_dir: Path, *args: object) -> None:
        writes.append(run_dir.name)
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir))

    monkeypatch.setattr(launcher.runs, "prepare", full)
    service, submission_id, jobs = await _submit(pool, SLURM, clock, tmp_path, "LAB")
    scheduler = Scheduler(pool, SLURM, {"slurm": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle(jobs), 60)
    (job,) = (await service.submissions.report(submission_id)).jobs
    assert job.state is JobState.FAILED
    assert "No space left on device" in (job.error or "")
    # Two attempts, each retried three times by the dispatch: never an endless loop.
    assert len(writes) <= FAST.max_attempts * 3
    record_property("observed", f"failed after {len(writes)} dispatches: {job.error}")


async def test_an_os_error_of_a_launcher_is_a_launcher_error(tmp_path: Path, monkeypatch):
    launcher = SlurmLauncher(tmp_path / "shared")

    def unreadable(external_id: str) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "result.json")

    monkeypatch.setattr(launcher.runs, "read_result", unreadable)
    with pytest.raises(LauncherError, match=r"slurm launcher, result: .*Permission denied"):
        await launcher.result(RunHandle("slurm", "1"))


@pytest.mark.reliability(
    "Faults",
    "the result of a finished run fails to download once (a launcher error while following)",
    "the same run is followed again and recorded; it is not dispatched a second time",
)
async def test_a_finished_run_whose_result_fails_once_is_not_dispatched_again(
    pool, clock, tmp_path: Path, record_property
):
    class FlakyResult(FakeLauncher):
        failures: int = 1

        async def result(self, handle):
            if self.failures:
                self.failures -= 1
                raise LauncherError("artifact download broke off")
            return await super().result(handle)

    launcher = FlakyResult()
    service, submission_id, jobs = await _submit(pool, FAKE, clock, tmp_path, "H100")
    scheduler = Scheduler(pool, FAKE, {"fake": launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle(jobs), 30)
    report = await service.submissions.report(submission_id)
    assert [j.state for j in report.jobs] == [JobState.FINISHED]
    assert sum(launcher.submits.values()) == 1, launcher.submits
    record_property("observed", f"dispatches: {sum(launcher.submits.values())}, recorded once")
