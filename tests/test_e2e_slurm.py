"""A ranked submission end to end through Slurm on the real one-node cluster: service ->
queue -> scheduler -> sbatch -> runner on the node -> result file -> database -> ranking."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.core.records import JobState
from cluster_manager.launchers.slurm import SlurmLauncher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from tests.conftest import CORRECT, load_task, write_task
from tests.support.slurm_cluster import slurm_cluster  # noqa: F401 - the fixture
from tests.support.slurm_lock import slurm_shared  # noqa: F401 - the fixture

REGISTRY = GpuRegistry(
    {"LAB": GpuType("LAB", "slurm", max_concurrent=2, params={"cpus_per_task": 1})}
)


@pytest.mark.usefixtures("slurm_shared")
async def test_ranked_submission_through_slurm_lands_in_the_ranking(pool, clock, tmp_path):
    service = Service(pool, REGISTRY, clock=clock)
    task = load_task(write_task(tmp_path / "task"))
    await service.leaderboards.create("lab", task, clock.now + timedelta(days=1), ["LAB"])
    receipt = await service.submissions.submit(
        "lab", Submitter("alice", "alice"), "s.py", CORRECT.encode(), mode=Mode.LEADERBOARD
    )

    launcher = SlurmLauncher(tmp_path / "shared", poll_interval=0.3)
    config = SchedulerConfig(lease_s=30, heartbeat_s=5, poll_s=0.1)
    scheduler = Scheduler(pool, REGISTRY, {"slurm": launcher}, config=config)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 240)

    report = await service.submissions.report(receipt.submission_id)
    assert [j.state for j in report.jobs] == [JobState.FINISHED, JobState.FINISHED]
    assert all(r.passed for r in report.runs), [r.verdict for r in report.runs]
    # The public run's score is shown; the secret re-run's never is.
    assert [bool(r.score) for r in sorted(report.runs, key=lambda r: r.secret)] == [True, False]
    # External ids are Slurm job ids once dispatched.
    assert all(j.external_id and j.external_id.isdigit() for j in report.jobs)
    ranking = await service.leaderboards.ranking("lab")
    assert [(e.rank, e.user) for e in ranking["LAB"]] == [(1, "alice")]
