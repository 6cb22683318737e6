"""One timeout model: a task whose runs may outlast what a launcher allows is refused when
its leaderboard is created, instead of ending as the launcher's cancellation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from cluster_manager.core import gpus
from cluster_manager.core.gpus import GITHUB_TIMEOUT_MINUTES, GpuRegistry, GpuType
from cluster_manager.core.models import Limits
from cluster_manager.core.phases import longest_run_s
from cluster_manager.core.task import load_task
from cluster_manager.service import GpuNotAllowedError, Service
from tests.conftest import ROOT, write_task

REGISTRY = GpuRegistry(
    {
        "B200": GpuType("B200", "github", max_concurrent=1),
        "LAB": GpuType("LAB", "slurm", max_concurrent=1),
    }
)
LONG = {"test_timeout": 3600, "benchmark_timeout": 3600, "ranked_timeout": 3600}


@pytest.mark.reliability(
    "Bad input",
    "a leaderboard on a GitHub GPU whose task asks for 3600 s per phase, with the workflows' "
    "old timeout-minutes of 30",
    "refused at create time with both durations and the launcher named; a Slurm GPU takes it",
)
async def test_a_task_longer_than_its_launcher_allows_is_refused(
    pool, clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record_property
):
    monkeypatch.setitem(gpus.LAUNCHER_MAX_RUN_S, "github", 30 * 60.0)
    service = Service(pool, REGISTRY, clock=clock)
    task = load_task(write_task(tmp_path / "long", extra=LONG))
    deadline = clock.now + timedelta(days=1)
    with pytest.raises(GpuNotAllowedError, match="over the 30 min the github launcher") as info:
        await service.leaderboards.create("long", task, deadline, ["B200"])
    assert await service.leaderboards.all() == []
    await service.leaderboards.create("long", task, deadline, ["LAB"])
    record_property("observed", str(info.value))


def test_the_longest_task_there_can_be_fits_every_launcher(tmp_path: Path):
    """Every phase at its 3600 s maximum, CUDA compilation included."""
    task = load_task(write_task(tmp_path / "longest", extra=LONG))
    longest = longest_run_s(task, Limits()) + Limits().compile_timeout
    assert all(longest <= limit for limit in gpus.LAUNCHER_MAX_RUN_S.values())


def test_the_workflows_allow_what_the_registry_says():
    for name in ("nvidia_workflow.yml", "amd_workflow.yml"):
        workflow = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
        assert workflow["jobs"]["run"]["timeout-minutes"] == GITHUB_TIMEOUT_MINUTES, name
