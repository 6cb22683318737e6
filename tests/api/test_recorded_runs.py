"""The replaying launcher the front-end tests run on (tests/support/replay.py): what its key counts,
how a replayed run unfolds, holding runs in flight, and recording a run it has not seen."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cluster_manager.core.models import Limits, Mode, RunRequest, ScriptMode, Verdict
from cluster_manager.core.phases import script_task
from cluster_manager.core.progress import ProgressEvent
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.launchers.base import RunState
from tests.api.conftest import IDENTITY, source
from tests.support.replay import (
    FORMAT_VERSION,
    RECORDINGS,
    Recording,
    ReplayLauncher,
    recording_key,
)

EVENTS: tuple[ProgressEvent, ...] = (
    {"event": "phase", "phase": "test", "cases": 3},
    {"event": "phase_done", "phase": "test", "verdict": "passed"},
    {"event": "phase", "phase": "leaderboard", "cases": 2},
    {"event": "phase_done", "phase": "leaderboard", "verdict": "passed"},
)


def ranked(seed: int | None = 1, code: str | None = None) -> RunRequest:
    task = load_task(IDENTITY)
    code = source().decode() if code is None else code
    return RunRequest.of_submission(task, code, Mode.LEADERBOARD, Limits(), seed)


def test_the_key_counts_all_but_the_seeds_value():
    key = recording_key(ranked(1))
    assert recording_key(ranked(2)) == key  # any secret seed replays as well as another
    task = ranked().task
    edited = dataclasses.replace(
        task, files=tuple(dataclasses.replace(f, content=f"{f.content}#") for f in task.files)
    )
    for other in (
        ranked(None),  # the public run of the pair: no seed at all
        ranked(1, code=source().decode() + "\n# another kernel\n"),
        dataclasses.replace(ranked(1), mode=Mode.BENCHMARK),
        dataclasses.replace(ranked(1), task=edited),
        dataclasses.replace(ranked(1), limits=Limits(memory_bytes=1 << 30)),
    ):
        assert recording_key(other) != key


async def test_a_recorded_run_shows_one_progress_event_a_poll_then_its_result(tmp_path: Path):
    request = ranked()
    result = RunResult(True, Verdict.PASSED, Mode.LEADERBOARD, "ok", score=1e-5)
    launcher = ReplayLauncher(tmp_path / "runs", recordings=tmp_path, min_running_s=0)
    Recording(result, EVENTS).save(launcher.path_of(request), request)

    handle = await launcher.submit(request, "job-1")
    seen = []
    for shown in (1, 2, 3):
        assert (await launcher.states([handle]))["job-1"] is RunState.RUNNING
        seen.append(await launcher.progress(handle))
        assert len(seen[-1]) == shown
    assert (await launcher.states([handle]))["job-1"] is RunState.FINISHED
    assert await launcher.progress(handle) == list(EVENTS)
    assert await launcher.result(handle) == result
    assert launcher.replayed == [launcher.path_of(request).stem]
    assert await launcher.submit(request, "job-1") == handle  # the same key: the same run


async def test_held_runs_stay_in_flight_until_let_go_and_can_be_cancelled(tmp_path: Path):
    request = ranked()
    result = RunResult(True, Verdict.PASSED, Mode.LEADERBOARD, "ok", score=1e-5)
    launcher = ReplayLauncher(tmp_path / "runs", recordings=tmp_path, min_running_s=0)
    Recording(result, EVENTS).save(launcher.path_of(request), request)
    launcher.hold()
    kept, cancelled = await launcher.submit(request, "a"), await launcher.submit(request, "b")
    for _ in range(10):
        states = await launcher.states([kept, cancelled])
        assert set(states.values()) == {RunState.RUNNING}
    assert await launcher.progress(kept) == list(EVENTS[:-1])  # not done: no last event
    await launcher.cancel(cancelled)
    launcher.let_go()
    states = await launcher.states([kept, cancelled])
    assert states == {"a": RunState.FINISHED, "b": RunState.LOST}
    assert launcher.cancelled == ["b"]


async def test_a_run_without_a_recording_runs_for_real_once_and_is_recorded(tmp_path: Path):
    request = RunRequest(
        task=script_task("hello.py", 60),
        submission_name="hello.py",
        submission_code=f"print('recorded {tmp_path.name}')\n",  # never recorded before
        mode=ScriptMode.SCRIPT,
        limits=Limits(memory_bytes=8 << 30),
    )
    first = ReplayLauncher(tmp_path / "runs", recordings=tmp_path / "recorded")
    real = await first.follow(await first.submit(request, "real"), timeout=120)
    assert real is not None and real.passed, real
    assert first.replayed == [] and first.recorded == [recording_key(request)]
    assert "recorded" in real.phases[0].stdout

    second = ReplayLauncher(tmp_path / "runs", recordings=tmp_path / "recorded")
    seen: list[ProgressEvent] = []
    replayed = await second.follow(
        await second.submit(request, "again"), timeout=10, on_progress=seen.append
    )
    assert replayed == real and second.replayed == [recording_key(request)]
    assert seen and seen == await first.progress(first.attach("real"))


def test_every_checked_in_recording_is_readable():
    paths = sorted(RECORDINGS.glob("*.json"))
    assert paths, "no recordings: the front-end tests would all run for real"
    for path in paths:
        assert Recording.load(path) is not None, f"{path.name}: not format {FORMAT_VERSION}"
