"""The one interface every launcher implements: submit, follow, fetch, cancel, re-attach.

A launcher turns a `RunRequest` into a run somewhere (this machine, a GitHub runner, a Slurm
node, Modal) and gives back a `RunHandle` whose `external_id` is all that is needed to find
the run again after a restart.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.progress import ProgressEvent
from cluster_manager.core.run_results import RunResult

ProgressCallback = Callable[[ProgressEvent], None]
T = TypeVar("T")


class RunTimedOutError(LauncherError):
    """The run did not finish in time; it has been cancelled."""


class RunState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"  # a result can be fetched
    LOST = "lost"  # the run is gone without a result


@dataclass(frozen=True)
class RunHandle:
    launcher: str
    external_id: str


# The calls that reach outside the process (files, commands, the network); each adapter's
# OSError becomes a LauncherError at this edge, so a full disk or a read-only share is a
# launcher's failure (counted, retried, reported), never mistaken for the database's.
EDGE_METHODS = ("submit", "states", "result", "cancel", "progress", "release", "close")


def _at_the_edge(name: str, method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(method)
    async def guarded(self: Launcher, *args: Any, **kwargs: Any) -> T:
        try:
            return await method(self, *args, **kwargs)
        except OSError as exc:
            raise LauncherError(f"{self.name} launcher, {name}: {exc}") from exc

    return guarded


class Launcher(abc.ABC):
    name: str
    poll_interval: float = 1.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in EDGE_METHODS:
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "__isabstractmethod__", False):
                setattr(cls, name, _at_the_edge(name, method))

    @abc.abstractmethod
    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        """Starts the run and returns as soon as it has an external id.

        `gpu` carries the registry's parameters for the GPU type (workflow, runner labels,
        Modal GPU, Slurm partition and gres); remote launchers need it.

        `key` is unique per dispatch attempt and recorded before this is called: submitting
        the same key again must not start a second run (a worker may die right after
        dispatching, and its successor dispatches again with the same key).
        """

    @abc.abstractmethod
    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        """States of many runs at once, keyed by external id (one call for all of them)."""

    @abc.abstractmethod
    async def result(self, handle: RunHandle) -> RunResult:
        """The result of a finished run."""

    @abc.abstractmethod
    async def cancel(self, handle: RunHandle) -> None:
        """Stops the run; a run that already ended is left as it is."""

    def attach(self, external_id: str) -> RunHandle:
        """Re-attaches to a run started earlier, e.g. by a process that has since died."""
        return RunHandle(self.name, external_id)

    async def release(self, handle: RunHandle) -> None:
        """The run's result is stored: whatever the run left behind (its request, its output)
        may go. Called once the result is recorded; a no-op where nothing is left."""
        return None

    async def close(self) -> None:
        """Frees what the launcher holds (HTTP sessions); called once when the app closes."""
        return None

    async def progress(self, handle: RunHandle) -> list[ProgressEvent]:
        """Progress events reported so far by the run, oldest first (empty if unsupported)."""
        return []

    async def follow(
        self,
        handle: RunHandle,
        *,
        timeout: float,
        on_progress: ProgressCallback | None = None,
    ) -> RunResult | None:
        """Polls until the run finishes. None if the run was lost; `RunTimedOutError` (after
        cancelling it) if it did not finish within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = 0
        while True:
            state = (await self.states([handle])).get(handle.external_id, RunState.LOST)
            if on_progress is not None:
                events = await self.progress(handle)
                for event in events[seen:]:
                    on_progress(event)
                seen = len(events)
            if state is RunState.FINISHED:
                return await self.result(handle)
            if state is RunState.LOST:
                return None
            if loop.time() >= deadline:
                await self.cancel(handle)
                raise RunTimedOutError(f"no result within {timeout:.0f} s; the run was cancelled")
            await asyncio.sleep(self.poll_interval)
