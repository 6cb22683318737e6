"""Fakes at the edge we cannot reach: a launcher whose runs are scripted in memory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sandboxing import FULL, SANDBOX_KEY
from cluster_manager.launchers.base import Launcher, RunHandle, RunState

# What a runner reports after a fully sandboxed run: only such runs are ranked.
SANDBOXED = {SANDBOX_KEY: FULL}


def passing(request: RunRequest) -> RunResult:
    score = 0.001 if request.mode.value == "leaderboard" else None
    return RunResult(True, Verdict.PASSED, request.mode, "ok", score=score, system=SANDBOXED)


@dataclass
class FakeRun:
    request: RunRequest
    polls_left: int
    state: RunState = RunState.RUNNING


@dataclass
class FakeLauncher(Launcher):
    """Runs finish after `polls` state queries with `outcome(request)`; faults on demand."""

    name: str = "fake"
    polls: int = 1
    outcome: Callable[[RunRequest], RunResult] = passing
    submit_failures: int = 0  # the next N submits raise LauncherError
    lose_runs: bool = False  # runs vanish instead of finishing
    unreadable_results: bool = False  # runs finish, but reading their result fails
    poll_interval: float = 0.01
    runs: dict[str, FakeRun] = field(default_factory=dict)
    submits: Counter[str] = field(default_factory=Counter)
    cancelled: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        self.submits[key] += 1
        if self.submit_failures > 0:
            self.submit_failures -= 1
            raise LauncherError("the fake launcher is down")
        self.runs.setdefault(key, FakeRun(request, self.polls))
        return RunHandle(self.name, key)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        states = {}
        for handle in handles:
            run = self.runs.get(handle.external_id)
            if run is None:
                states[handle.external_id] = RunState.LOST
                continue
            if run.state is RunState.RUNNING:
                run.polls_left -= 1
                if run.polls_left <= 0:
                    run.state = RunState.LOST if self.lose_runs else RunState.FINISHED
            states[handle.external_id] = run.state
        return states

    async def result(self, handle: RunHandle) -> RunResult:
        run = self.runs.get(handle.external_id)
        if run is None or run.state is not RunState.FINISHED:
            raise LauncherError(f"no result for {handle.external_id}")
        if self.unreadable_results:
            raise LauncherError(f"the result of {handle.external_id} is unreadable")
        return self.outcome(run.request)

    async def release(self, handle: RunHandle) -> None:
        self.released.append(handle.external_id)

    async def cancel(self, handle: RunHandle) -> None:
        self.cancelled.append(handle.external_id)
        run = self.runs.get(handle.external_id)
        if run is not None:
            run.state = RunState.LOST
