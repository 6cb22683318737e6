"""Quick script runs through a real launcher (local), their input checks, and through the
service: a slot of the GPU type's concurrency and a per-user hourly limit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from cluster_manager.core.errors import ClusterManagerError, InvalidSubmissionError, LauncherError
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Limits, Mode, Verdict
from cluster_manager.launchers.local import LocalLauncher
from cluster_manager.service import GpuBusyError, RateLimitedError, Service, Submitter
from cluster_manager.service.script_launch import run_script, script_request
from cluster_manager.settings import load_settings
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.installation import installation_id
from tests.conftest import CORRECT, load_task, write_task
from tests.support.fakes import FakeLauncher

REGISTRY = GpuRegistry(
    {"CPU": GpuType("CPU", "local"), "H100": GpuType("H100", "modal", params={"modal_gpu": "H100"})}
)


async def test_a_script_runs_and_its_output_comes_back(tmp_path):
    request = script_request("hello.py", b"print('hi there')\n", timeout_s=20, limits=Limits())
    result = await run_script(REGISTRY, {"local": LocalLauncher(tmp_path)}, "CPU", request)
    assert result.verdict is Verdict.PASSED
    assert "hi there" in result.phases[0].stdout


@pytest.mark.reliability(
    "Faults",
    "a script run (`/run`) on a GPU type whose launcher is not configured in this process",
    "a clear LauncherError naming the missing launcher; nothing runs",
)
async def test_a_gpu_without_its_launcher_is_a_clear_error(tmp_path, record_property):
    request = script_request("x.py", b"print(1)\n", timeout_s=5, limits=Limits())
    with pytest.raises(LauncherError, match="no modal launcher for H100") as raised:
        await run_script(REGISTRY, {"local": LocalLauncher(tmp_path)}, "H100", request)
    record_property("observed", str(raised.value))


@pytest.mark.parametrize(
    ("name", "data", "timeout", "message"),
    [
        ("x.cu", b"int main(){}", 5, "takes a Python file"),
        ("x.py", b"  \n", 5, "the file is empty"),
        ("x.py", b"\xff\xfe", 5, "not UTF-8"),
        ("x.py", b"print(1)", 0, "time limit"),
        ("x.py", b"print(1)", 500, "time limit"),
    ],
)
def test_bad_scripts_are_refused(name, data, timeout, message):
    with pytest.raises(InvalidSubmissionError, match=message):
        script_request(name, data, timeout_s=timeout, limits=Limits())


# --- through the service: a slot of the GPU type's concurrency, a per-user limit --------------

ONE_SLOT = GpuRegistry({"H100": GpuType("H100", "fake", max_concurrent=1)})
ALICE = Submitter("alice", "alice")


async def _queued_job(service: Service, tmp_path) -> int:
    task = load_task(write_task(tmp_path / "t"))
    deadline = datetime(2031, 1, 1, tzinfo=UTC)
    await service.leaderboards.create("board", task, deadline, ["H100"])
    receipt = await service.submissions.submit(
        "board", ALICE, "s.py", CORRECT.encode(), mode=Mode.TEST
    )
    return receipt.jobs[0].id


async def _claim(pool) -> list:
    return await job_store.claim(
        pool, owner="worker", gpu="H100", max_active=1, lease_s=30, limit=1
    )


@pytest.mark.reliability(
    "Faults",
    "a script runs on a GPU type allowing one run at a time while a submission's job is queued",
    "the queue claims nothing until the script ends, then the job; a script slot whose holder "
    "died lapses on its own",
)
async def test_a_script_holds_a_slot_the_queue_respects(pool, clock, tmp_path, record_property):
    service = Service(pool, ONE_SLOT, clock=clock)
    job_id = await _queued_job(service, tmp_path)
    launcher = FakeLauncher(polls=10**9)
    request = script_request("x.py", b"print(1)\n", timeout_s=5, limits=Limits())
    running = asyncio.create_task(service.scripts.run(ALICE, "H100", request, {"fake": launcher}))
    while not launcher.runs:
        await asyncio.sleep(0.02)
    claimed_during = await _claim(pool)
    (run,) = launcher.runs.values()
    run.polls_left = 1
    result = await asyncio.wait_for(running, 10)
    claimed_after = await _claim(pool)
    record_property(
        "observed",
        f"claimed while the script ran: {claimed_during}; after: {[j.id for j in claimed_after]}",
    )
    assert result.passed
    assert claimed_during == []
    assert [j.id for j in claimed_after] == [job_id]

    # A holder that died stops renewing: its slot no longer counts once the lease lapses.
    await pool.execute("UPDATE jobs SET state = 'finished', lease_owner = NULL")
    await pool.execute(
        "INSERT INTO script_runs (user_id, gpu, started_at, lease_expires_at) "
        "SELECT id, 'H100', now(), now() - interval '1 second' FROM users LIMIT 1"
    )
    assert await job_store.active_on_gpu(pool, "H100") == 0


async def test_a_script_gives_up_when_the_gpu_stays_busy(pool, clock, tmp_path):
    service = Service(pool, ONE_SLOT, clock=clock, script_wait_s=0.5)
    await _queued_job(service, tmp_path)
    assert await _claim(pool)  # the job takes the only slot and keeps it
    launcher = FakeLauncher()
    request = script_request("x.py", b"print(1)\n", timeout_s=5, limits=Limits())
    states: list[str] = []

    async def on_state(state: str) -> None:
        states.append(state)

    with pytest.raises(GpuBusyError, match="all 1 slot"):
        await service.scripts.run(ALICE, "H100", request, {"fake": launcher}, on_state=on_state)
    assert states == ["waiting"]
    assert launcher.runs == {}


async def test_script_keys_carry_the_installation_and_refusals_cost_nothing(pool, clock):
    service = Service(pool, ONE_SLOT, clock=clock, script_rate_limit_per_hour=1)
    request = script_request("x.py", b"print(1)\n", timeout_s=5, limits=Limits())
    with pytest.raises(LauncherError, match="no fake launcher"):
        await service.scripts.run(ALICE, "H100", request, {})
    launcher = FakeLauncher()
    assert (await service.scripts.run(ALICE, "H100", request, {"fake": launcher})).passed
    (key,) = launcher.runs
    assert key.startswith(f"{await installation_id(pool)}-script-")
    with pytest.raises(RateLimitedError, match="1 script runs per hour; try again in 60 min"):
        await service.scripts.run(ALICE, "H100", request, {"fake": launcher})
    clock.now += timedelta(hours=1, seconds=1)
    assert (await service.scripts.run(ALICE, "H100", request, {"fake": launcher})).passed


def test_the_script_limit_is_a_setting():
    assert load_settings({}, None).script_rate_limit_per_hour == 10
    limit = load_settings({"CLUSTER_MANAGER_SCRIPT_RATE_LIMIT_PER_HOUR": "3"}, None)
    assert limit.script_rate_limit_per_hour == 3
    with pytest.raises(ClusterManagerError, match="positive whole number"):
        load_settings({"CLUSTER_MANAGER_SCRIPT_RATE_LIMIT_PER_HOUR": "0"}, None)
