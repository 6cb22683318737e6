"""A launcher for the front-end tests that replays recorded runs instead of running them.

A real run through `LocalLauncher` spawns the runner, a sandboxed harness and torch workers:
5 to 60 s a test on a busy machine, and a timeout verdict now and then when the machine is
loaded. The front ends only need what a run reports (its `RunResult` and its progress
events), so each run is looked up by a key over everything in its request that decides the
outcome, and its recording is replayed. A request without a recording is run for real once
and recorded under tests/fixtures/recorded_runs/ (checked in), so a new test costs one real
run and is fast from then on. Delete a recording (or bump `FORMAT_VERSION` for all of them)
to record it again.

A test that needs the real launcher is marked `real_runs`; one that needs a run in
flight (cancelled, adopted after a crash, deleted while running) holds the runs with
`ReplayLauncher.hold` until it lets them go.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.progress import ProgressEvent
from cluster_manager.core.run_results import RunResult
from cluster_manager.harness.ncu import find_ncu
from cluster_manager.launchers.base import Launcher, RunHandle, RunState
from cluster_manager.launchers.local import LocalLauncher

log = logging.getLogger(__name__)

# Part of every key: bump it when what the runner reports changes in a way the front ends
# show, and every recording is made again on its next use.
FORMAT_VERSION = 1
RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "recorded_runs"
# Verdicts that say more about the machine's load than about the code: never frozen into a
# recording, so a run that timed out on a busy machine is run again next time.
NOT_RECORDED = frozenset({Verdict.TIMEOUT, Verdict.INTERNAL_ERROR})


def recording_key(request: RunRequest) -> str:
    """A hash of what decides the run's outcome: the task (its files' contents included), the
    submission's name and code, the mode, limits, devices and profile options. The secret
    seed's value is left out (a ranked seed differs every time and any seed is as valid); only
    whether there is one counts."""
    data = request.to_json()
    data["secret_seed"] = request.secret_seed is not None
    # A profile's report depends on whether an ncu is reachable (the tests' fake one, say).
    machine = {"ncu": find_ncu(os.environ) is not None} if request.mode is Mode.PROFILE else {}
    blob = json.dumps(
        {"format": FORMAT_VERSION, "request": data, "machine": machine},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Recording:
    """What one real run reported: its result and its progress events, oldest first."""

    result: RunResult
    progress: tuple[ProgressEvent, ...]

    @classmethod
    def load(cls, path: Path) -> Recording | None:
        """None when there is none, or one this code cannot read (it is then made again)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT_VERSION:
                return None
            return cls(RunResult.from_json(data["result"]), tuple(data["progress"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, path: Path, request: RunRequest) -> None:
        """Written to a temporary file and renamed: two xdist workers recording the same run
        at once leave one whole file, never a mix of both."""
        code = request.submission_code.strip().splitlines()
        data = {
            "format": FORMAT_VERSION,
            "what": {  # for the people reading a diff; the key alone decides
                "task": request.task.name,
                "mode": request.mode.value,
                "submission": request.submission_name,
                "first_line": code[0] if code else "",
                "secret_seed": request.secret_seed is not None,
            },
            "result": self.result.to_json(),
            "progress": list(self.progress),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)


@dataclass
class _Replay:
    recording: Recording
    started: float
    polls: int = 0
    state: RunState = RunState.RUNNING


@dataclass
class ReplayLauncher(Launcher):
    """Replays recorded runs under the local launcher's name; runs what has no recording on a
    real `LocalLauncher` (same runs directory) and records it.

    A replayed run stays RUNNING for at least `polls` state queries and `min_running_s`,
    showing one more of its progress events at each query and the last with its result, so
    the live views (status edits, event streams) see it queued, running each phase and done,
    as they would a real one.
    """

    runs_dir: Path
    recordings: Path = RECORDINGS
    polls: int = 2
    min_running_s: float = 0.5
    poll_interval: float = 0.05
    name: str = "local"
    replayed: list[str] = field(default_factory=list)  # recording keys, in submit order
    recorded: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    _real: LocalLauncher = field(init=False)
    _runs: dict[str, _Replay] = field(default_factory=dict, init=False)
    _live: dict[str, RunRequest] = field(default_factory=dict, init=False)
    _held: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._real = LocalLauncher(self.runs_dir)

    def hold(self) -> None:
        """Runs, replayed or real, report RUNNING (with their early progress) until `let_go`:
        for tests of what happens while a run is in flight."""
        self._held = True

    def let_go(self) -> None:
        self._held = False

    def path_of(self, request: RunRequest) -> Path:
        return self.recordings / f"{recording_key(request)}.json"

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        if key in self._runs or key in self._live:
            return RunHandle(self.name, key)  # already dispatched under this key
        path = self.path_of(request)
        recording = Recording.load(path)
        if recording is None:
            handle = await self._real.submit(request, key, gpu=gpu)
            self._live[handle.external_id] = request
            return RunHandle(self.name, handle.external_id)
        self.replayed.append(path.stem)
        self._runs[key] = _Replay(recording, time.monotonic())
        return RunHandle(self.name, key)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        states = {}
        for handle in handles:
            run = self._runs.get(handle.external_id)
            if run is None:  # a real run (ours, or left by another launcher in runs_dir)
                state = (await self._real.states([handle]))[handle.external_id]
                if self._held and state is RunState.FINISHED:
                    state = RunState.RUNNING
                states[handle.external_id] = state
                continue
            if run.state is RunState.RUNNING:
                run.polls += 1
                ran_for = time.monotonic() - run.started
                enough = max(self.polls, len(run.recording.progress))
                if not self._held and run.polls >= enough and ran_for >= self.min_running_s:
                    run.state = RunState.FINISHED
            states[handle.external_id] = run.state
        return states

    async def result(self, handle: RunHandle) -> RunResult:
        run = self._runs.get(handle.external_id)
        if run is None:
            result = await self._real.result(handle)
            request = self._live.get(handle.external_id)
            if request is not None:
                self._record(request, result, await self._real.progress(handle))
            return result
        if run.state is not RunState.FINISHED:
            raise LauncherError(f"run {handle.external_id} has not finished")
        return run.recording.result

    def _record(
        self, request: RunRequest, result: RunResult, progress: list[ProgressEvent]
    ) -> None:
        if result.verdict in NOT_RECORDED:
            return
        path = self.path_of(request)
        try:
            Recording(result, tuple(progress)).save(path, request)
        except OSError as exc:  # a read-only checkout: the run still counts, unrecorded
            log.warning("could not record run %s: %s", path.name, exc)
            return
        self.recorded.append(path.stem)

    async def progress(self, handle: RunHandle) -> list[ProgressEvent]:
        run = self._runs.get(handle.external_id)
        if run is None:
            return await self._real.progress(handle)
        events = run.recording.progress
        if run.state is RunState.FINISHED:
            return list(events)
        return list(events[: min(run.polls, len(events) - 1)])  # the last comes with the result

    async def cancel(self, handle: RunHandle) -> None:
        self.cancelled.append(handle.external_id)
        run = self._runs.get(handle.external_id)
        if run is None:
            await self._real.cancel(handle)
        elif run.state is RunState.RUNNING:
            run.state = RunState.LOST

    async def release(self, handle: RunHandle) -> None:
        if handle.external_id not in self._runs:
            await self._real.release(handle)

    async def close(self) -> None:
        await self._real.close()


# --- fixtures (imported by the front ends' conftest modules) ----------------------------------


@pytest.fixture
def local_launcher(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Launcher]:
    """The launcher behind the "local" GPU types: replaying, unless the test is marked
    `real_runs` (the one end-to-end run kept per front end).

    On CI a run that had to be recorded fails the test: its recording is missing from the
    checkout, so every CI run would pay for it (a change to what a request holds changes
    every key, and the front-end tests silently ran for real, twice as long)."""
    if request.node.get_closest_marker("real_runs"):
        yield LocalLauncher(tmp_path / "runs")
        return
    launcher = ReplayLauncher(tmp_path / "runs")
    yield launcher
    if launcher.recorded and os.environ.get("CI"):
        pytest.fail(
            f"{len(launcher.recorded)} run(s) had no recording in {RECORDINGS}: "
            f"{', '.join(launcher.recorded)}. Run this test once outside CI and commit them.",
            pytrace=False,
        )


@pytest.fixture
def replay_launcher(local_launcher: Launcher) -> ReplayLauncher:
    """The replaying launcher itself, for tests that hold runs in flight."""
    assert isinstance(local_launcher, ReplayLauncher), "this test needs replayed runs"
    return local_launcher
