"""The local launcher: submit, follow with progress, re-attach from a new process, cancel."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.task import load_task
from cluster_manager.launchers.base import RunHandle, RunState, RunTimedOutError
from cluster_manager.launchers.local import LocalLauncher, runner_env
from tests.conftest import CORRECT, make_request, processes_with, write_task


def test_submit_follow_and_progress(tmp_path: Path):
    task = load_task(write_task(tmp_path / "t"))
    launcher = LocalLauncher(tmp_path / "runs")
    events = []

    async def go():
        handle = await launcher.submit(
            make_request(task, CORRECT, Mode.BENCHMARK), uuid.uuid4().hex
        )
        return await launcher.follow(handle, timeout=120, on_progress=events.append)

    result = asyncio.run(go())
    assert result is not None and result.passed, result and result.message
    phases = [e["phase"] for e in events if e["event"] == "phase"]
    assert phases == ["test", "benchmark"]
    assert [e["verdict"] for e in events if e["event"] == "phase_done"] == ["passed", "passed"]


def test_a_new_launcher_reattaches_by_external_id(tmp_path: Path):
    task = load_task(write_task(tmp_path / "t"))
    runs = tmp_path / "runs"

    async def start():
        first = LocalLauncher(runs)
        handle = await first.submit(make_request(task, CORRECT), "run-1")
        await first.wait(handle)
        return handle.external_id

    external_id = asyncio.run(start())

    async def reattach():
        second = LocalLauncher(runs)  # as if the process had restarted
        handle = second.attach(external_id)
        states = await second.states([handle])
        return states[external_id], await second.result(handle)

    state, result = asyncio.run(reattach())
    assert state is RunState.FINISHED
    assert result.passed


def _spinner(marker: str) -> str:
    """A kernel that starts a marked child process and then never returns."""
    return (
        "import subprocess, sys\n"
        "def custom_kernel(d):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
        f"{marker!r}])\n"
        "    while True:\n"
        "        pass\n"
    )


@pytest.mark.reliability(
    "Sandbox",
    "cancelling a run whose kernel spins forever after starting a child process",
    "the run is lost and its whole process tree killed",
)
def test_cancel_kills_the_whole_tree_and_unknown_ids_are_lost(tmp_path: Path, record_property):
    marker = f"cm-cancel-{uuid.uuid4().hex}"
    task = load_task(write_task(tmp_path / "t", extra={"test_timeout": 60}))
    launcher = LocalLauncher(tmp_path / "runs")

    async def go():
        handle = await launcher.submit(make_request(task, _spinner(marker)), uuid.uuid4().hex)
        for _ in range(100):  # until the kernel is spinning
            await asyncio.sleep(0.2)
            if processes_with(marker):
                break
        running = (await launcher.states([handle]))[handle.external_id]
        await launcher.cancel(handle)
        after = (await launcher.states([handle]))[handle.external_id]
        ghost = launcher.attach("0" * 32)
        return running, after, (await launcher.states([ghost]))[ghost.external_id]

    running, after, ghost = asyncio.run(go())
    assert running is RunState.RUNNING
    assert after is RunState.LOST
    assert ghost is RunState.LOST
    time.sleep(0.3)
    leftovers = processes_with(marker)
    record_property(
        "observed",
        f"{running.value} before cancel, {after.value} after; {len(leftovers)} processes left",
    )
    assert leftovers == []


@pytest.mark.reliability(
    "Sandbox",
    "following a run whose kernel never returns, with a 2 s follow timeout",
    "RunTimedOutError after 2 s and the run is cancelled (lost)",
)
def test_follow_gives_up_and_cancels_after_its_timeout(tmp_path: Path, record_property):
    task = load_task(write_task(tmp_path / "t", extra={"test_timeout": 60}))
    launcher = LocalLauncher(tmp_path / "runs")

    async def go():
        handle = await launcher.submit(
            make_request(task, "def custom_kernel(d):\n    while True:\n        pass\n"),
            uuid.uuid4().hex,
        )
        began = time.monotonic()
        with pytest.raises(RunTimedOutError, match="no result within 2 s") as raised:
            await launcher.follow(handle, timeout=2)
        waited = time.monotonic() - began
        state = (await launcher.states([handle]))[handle.external_id]
        record_property(
            "observed",
            f"{raised.typename} after {waited:.1f} s ({raised.value}); run {state.value}",
        )
        return state

    assert asyncio.run(go()) is RunState.LOST


def test_verdicts_arrive_through_the_launcher(tmp_path: Path):
    task = load_task(write_task(tmp_path / "t"))
    launcher = LocalLauncher(tmp_path / "runs")

    async def go():
        handle = await launcher.submit(
            make_request(task, "def custom_kernel(d):\n    return d*2\n"), uuid.uuid4().hex
        )
        return await launcher.follow(handle, timeout=60)

    result = asyncio.run(go())
    assert result is not None and result.verdict is Verdict.WRONG_ANSWER


def test_submitting_the_same_key_twice_starts_one_run(tmp_path: Path):
    task = load_task(write_task(tmp_path / "t"))
    launcher = LocalLauncher(tmp_path / "runs")

    async def go():
        request = make_request(task, CORRECT)
        first = await launcher.submit(request, "job-7-1")
        again = await LocalLauncher(tmp_path / "runs").submit(request, "job-7-1")
        result = await launcher.follow(first, timeout=60)
        return first, again, result

    first, again, result = asyncio.run(go())
    assert first == again
    assert result is not None and result.passed
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["job-7-1"]


def test_each_slot_gets_its_share_of_the_cores_for_the_tasks_threads():
    cores = len(os.sched_getaffinity(0))
    two_slots = GpuType("CPU", "local", max_concurrent=2)
    assert runner_env({"PATH": "/bin"}, two_slots) == {
        "PATH": "/bin",
        "OMP_NUM_THREADS": str(max(1, cores // 2)),
    }
    crowded = GpuType("CPU", "local", max_concurrent=cores * 4)
    assert runner_env({}, crowded)["OMP_NUM_THREADS"] == "1"
    # The operator's choice stands; without a GPU type nothing is added.
    assert runner_env({"OMP_NUM_THREADS": "7"}, two_slots)["OMP_NUM_THREADS"] == "7"
    assert runner_env({"PATH": "/bin"}, None) == {"PATH": "/bin"}


def _age(path: Path, hours: float) -> None:
    """Dates a directory (and what is in it) `hours` back."""
    then = time.time() - hours * 3600
    for item in [*path.iterdir(), path]:
        os.utime(item, (then, then))


def _old_folder(runs: Path, name: str, hours: float, *, released: bool) -> Path:
    folder = runs / name
    folder.mkdir(parents=True)
    (folder / "result.json").write_text("{}")
    if released:
        (folder / "released").touch()
    _age(folder, hours)
    return folder


def test_a_released_runs_folder_goes_at_once(tmp_path: Path):
    task = load_task(write_task(tmp_path / "t"))
    launcher = LocalLauncher(tmp_path / "runs")

    async def go():
        handle = await launcher.submit(make_request(task, CORRECT), "job-1-1")
        result = await launcher.follow(handle, timeout=120)
        kept = (tmp_path / "runs" / "job-1-1" / "result.json").is_file()
        await launcher.release(handle)
        return result, kept

    result, kept_until_released = asyncio.run(go())
    assert result is not None and result.passed
    assert kept_until_released
    assert list((tmp_path / "runs").iterdir()) == []


def test_released_folders_stay_for_the_hours_asked_then_go(tmp_path: Path):
    runs = tmp_path / "runs"
    stale = _old_folder(runs, "released-2h-ago", 2, released=True)
    recent = _old_folder(runs, "released-just-now", 0, released=True)
    # Never released (its server died before it stored the result): kept a day for a
    # restarted server to take its job over, then swept.
    orphan = _old_folder(runs, "never-released-2d", 48, released=False)
    pending = _old_folder(runs, "never-released-2h", 2, released=False)

    LocalLauncher(runs, keep_s=3600)  # prunes on start

    assert not stale.exists() and not orphan.exists()
    assert recent.is_dir() and pending.is_dir()

    # A later release prunes too (the hour of `recent` has passed meanwhile); the folder it
    # releases is marked and stays its hour.
    _age(recent, 1.5)
    folder = _old_folder(runs, "job-2-1", 0, released=False)
    asyncio.run(LocalLauncher(runs, keep_s=3600).release(RunHandle("local", "job-2-1")))
    assert (folder / "released").is_file()
    assert sorted(p.name for p in runs.iterdir()) == ["job-2-1", "never-released-2h"]


def test_a_running_runs_folder_is_never_removed(tmp_path: Path):
    """However old, and even when released: a run taken over after a restart is found again
    by its folder while its runner still works in it."""
    runs = tmp_path / "runs"
    folder = _old_folder(runs, "job-3-1", 72, released=True)
    (folder / "result.json").unlink()
    # A process whose command line names the folder's result file, as the runner's does.
    runner = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(folder / "result.json")]
    )
    try:
        cmdline = Path(f"/proc/{runner.pid}/cmdline")
        while str(folder / "result.json").encode() not in cmdline.read_bytes():
            time.sleep(0.01)  # until it runs as itself (its command line empty before that)
        (folder / "pid").write_text(str(runner.pid))
        _age(folder, 72)
        launcher = LocalLauncher(runs)  # prunes on start
        asyncio.run(launcher.release(RunHandle("local", "job-3-1")))
        assert folder.is_dir()
        # Once it has written its result it is done, even while it is still exiting.
        (folder / "result.json").write_text("{}")
        asyncio.run(launcher.release(RunHandle("local", "job-3-1")))
        assert not folder.exists()
    finally:
        runner.kill()
        runner.wait()
