"""A profile submission's Nsight Compute filter (submissions.profile_options, migration 0015):
stored and read back, refused outside profile mode before anything is stored, and handed by
the scheduler to the run; a row from before the column (NULL) gets the default filter."""

from __future__ import annotations

import asyncio

import pytest

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service
from cluster_manager.storage import submissions as sub_store
from tests.storage.helpers import ALICE, count_rows, kernel_code, make_board
from tests.support.fakes import FakeLauncher

FAST = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.05)
NARROW = ProfileOptions(
    kernel_name="gemm_.*|mma", kernel_name_base="mangled", launch_skip=4, launch_count=2
)


async def submit(service: Service, mode: Mode, profile: ProfileOptions | None) -> int:
    receipt = await service.submissions.submit(
        "board", ALICE, "submission.py", kernel_code().encode(), mode=mode, profile=profile
    )
    return receipt.submission_id


async def test_the_filter_is_stored_and_read_back(service, pool):
    await make_board(service)
    narrowed = await submit(service, Mode.PROFILE, NARROW)
    default = await submit(service, Mode.PROFILE, None)

    found = await sub_store.get_submission(pool, narrowed)
    assert found is not None and found.profile == NARROW
    plain = await sub_store.get_submission(pool, default)
    assert plain is not None and plain.profile is None
    raw = dict(await pool.fetch("SELECT id, profile_options FROM submissions"))
    assert raw == {narrowed: NARROW.to_json(), default: None}  # plain JSON, readable by SQL too


@pytest.mark.parametrize("mode", [Mode.TEST, Mode.BENCHMARK, Mode.LEADERBOARD])
async def test_a_filter_outside_profile_mode_is_refused_and_nothing_stored(service, pool, mode):
    await make_board(service)
    with pytest.raises(ClusterManagerError, match=f"for profile mode only, not {mode.value} mode"):
        await submit(service, mode, ProfileOptions(launch_count=3))
    assert await count_rows(pool, "submissions", "jobs") == {"submissions": 0, "jobs": 0}


async def test_the_scheduler_hands_the_stored_filter_to_the_run(pool, clock):
    registry = GpuRegistry({"H100": GpuType("H100", "fake", max_concurrent=2)})
    service = Service(pool, registry, clock=clock)
    await make_board(service, gpus=("H100",))
    narrowed = await submit(service, Mode.PROFILE, NARROW)
    old = await submit(service, Mode.PROFILE, NARROW)
    # As a row stored before migration 0015 reads: no filter at all.
    await pool.execute("UPDATE submissions SET profile_options = NULL WHERE id = $1", old)

    launcher = FakeLauncher()
    scheduler = Scheduler(pool, registry, {"fake": launcher}, config=FAST)
    job_ids = {row["id"] for row in await pool.fetch("SELECT id FROM jobs")}
    await asyncio.wait_for(scheduler.run_until_idle(job_ids), 30)

    requests = {run.request.submission_code: run.request for run in launcher.runs.values()}
    assert len(requests) == 2
    by_id = {}
    for submission_id in (narrowed, old):
        found = await sub_store.get_submission(pool, submission_id)
        assert found is not None
        by_id[submission_id] = requests[found.code].profile
    assert by_id == {narrowed: NARROW, old: ProfileOptions()}
