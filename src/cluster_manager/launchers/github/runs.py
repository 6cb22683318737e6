"""The workflow runs a launcher follows: found by id or dispatch key, polled cheaply, cached.

External ids are run ids. A non-numeric external id is taken for a dispatch key and resolved by
run name among the newest runs (a worker that died before learning the run id re-attaches so).

Run states, from the run's `status` and its artifacts:
    queued / waiting / pending / requested -> QUEUED; in_progress -> RUNNING;
    completed with a `result` artifact -> FINISHED, whatever the conclusion (the workflow
    uploads result.json whenever the runner wrote one, even if the job then failed or was
    cancelled; the result itself says whether the submission passed);
    completed without one, or a run GitHub no longer knows -> LOST.

Request budget: one conditional list of the repository's dispatched runs (`If-None-Match`; an
unchanged list is a 304, free of rate limit) per poll interval, shared by every caller of
`states`, plus one right after a dispatch (shared by every run dispatched before it; that list
changed anyway, so the next poll's is more often a free 304); a run missing from that first
page is fetched on its own, also at most once per poll interval; finished runs are not polled
again.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster_manager.core.errors import LauncherError
from cluster_manager.launchers.base import RunState
from cluster_manager.launchers.github.client import (
    PER_PAGE,
    HttpError,
    TokenPool,
    answer_field,
    get,
)
from cluster_manager.launchers.github.payloads import RESULT_ARTIFACT

RUN_NAME = "cm job {key}"  # the workflows' run-name
RUNNING_STATUSES = frozenset({"in_progress"})


@dataclass
class Run:
    tracked_at: float
    data: dict[str, Any] | None = None  # the run as GitHub last described it
    seen_at: float = -math.inf  # start of the last runs list that held it
    fetched_at: float = -math.inf  # start of its last fetch on its own
    etag: str | None = None
    gone: bool = False  # GitHub answered 404
    artifact: dict[str, Any] | None = None
    artifact_known: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    dispatched_here: bool = False  # by this launcher, after the latest list it had then

    @property
    def status(self) -> str | None:
        return None if self.data is None else self.data.get("status")

    @property
    def final(self) -> bool:
        return self.gone or (self.status == "completed" and self.artifact_known)


class RunTracker:
    """What this process knows of the repository's runs, and the requests that keep it fresh."""

    def __init__(
        self,
        pool: TokenPool,
        repo: str,
        *,
        clock: Callable[[], float],
        poll_interval: float,
    ) -> None:
        self._pool = pool
        self._repo = repo
        self._clock = clock
        self._poll_interval = poll_interval
        self._runs: dict[str, Run] = {}
        self._aliases: dict[str, str] = {}  # dispatch key -> run id
        self._keys: dict[str, float] = {}  # dispatch key -> when first asked about
        self._page: list[dict[str, Any]] = []  # the newest dispatched runs, newest first
        self._list_etag: str | None = None
        self._list_started = -math.inf
        self._list_lock = asyncio.Lock()

    # --- what the launcher asks -----------------------------------------------------------------

    async def states(self, ids: set[str]) -> dict[str, RunState]:
        for external_id in ids:
            self._track_handle(external_id)
        if any(self._needs_poll(i) for i in ids):
            await self._refresh_list(newer_than=self._list_due(ids))
        resolved = {i: self.resolve(i) for i in ids}
        run_ids = {r for r in resolved.values() if r is not None}
        await asyncio.gather(*(self._refresh_unlisted(r) for r in run_ids))
        completed = [r for r in run_ids if self._runs[r].status == "completed"]
        await asyncio.gather(*(self._check_artifact(r) for r in completed))
        return {i: self._state(resolved[i]) for i in ids}

    async def find(self, key: str) -> str | None:
        """The newest run named with `key`, from a runs list started after this call."""
        await self._refresh_list(newer_than=self._clock())
        return self._titled(key)

    async def artifact(self, run_id: str) -> dict[str, Any] | None:
        """The run's unexpired result artifact, looked up once the run can no longer change."""
        run = self.track(run_id)
        await self._check_artifact(run_id)
        return run.artifact

    def events(self, external_id: str) -> list[dict[str, Any]]:
        """The run's status changes seen while polling."""
        run_id = self.resolve(external_id)
        run = self._runs.get(run_id) if run_id is not None else None
        return list(run.events) if run is not None else []

    def track(self, run_id: str) -> Run:
        return self._runs.setdefault(run_id, Run(tracked_at=self._clock()))

    def resolve(self, external_id: str) -> str | None:
        """The run id behind an external id: itself, or the run named with a dispatch key."""
        if external_id.isdigit():
            return external_id
        run_id = self._aliases.get(external_id) or self._titled(external_id)
        if run_id is not None and external_id not in self._aliases:
            self._aliases[external_id] = run_id
            self._adopt(run_id)
        return run_id

    async def run_id(self, external_id: str) -> str:
        run_id = self.resolve(external_id)
        if run_id is None:
            await self._refresh_list(newer_than=self._clock() - self._poll_interval)
            run_id = self.resolve(external_id)
        if run_id is None:
            raise LauncherError(f"no GitHub run is known for {external_id!r}")
        return run_id

    # --- polling --------------------------------------------------------------------------------

    async def _refresh_list(self, *, newer_than: float) -> None:
        """Fetches the runs list unless one started after `newer_than`. Concurrent callers
        wait for the same fetch instead of making their own."""
        async with self._list_lock:
            if self._list_started > newer_than:
                return
            started = self._clock()
            params = {"event": "workflow_dispatch", "per_page": str(PER_PAGE)}
            path = f"/repos/{self._repo}/actions/runs"
            answer = await self._pool.call(get(path, params, self._list_etag))
            if answer.status != 304:
                self._list_etag = answer.headers.get("etag")
                runs = answer_field(answer.data, "workflow_runs", list)
                self._page = [r for r in runs if isinstance(r, dict)]
            self._list_started = started
            for data in self._page:
                self._observe(data, started)

    async def _refresh_unlisted(self, run_id: str) -> None:
        """Fetches a run the latest list should have held but did not (older than its first
        page, or not listed yet), at most once per poll interval."""
        run = self._runs[run_id]
        if run.final or run.seen_at >= self._list_started:
            return
        now = self._clock()
        if self._list_started < run.tracked_at or now - run.fetched_at < self._poll_interval:
            return
        run.fetched_at = now
        path = f"/repos/{self._repo}/actions/runs/{run_id}"
        try:
            answer = await self._pool.call(get(path, etag=run.etag))
        except HttpError as exc:
            if exc.status != 404:
                raise
            run.gone = True
            return
        if answer.status != 304:
            run.etag = answer.headers.get("etag")
            self._observe(answer.data, -math.inf)

    async def _check_artifact(self, run_id: str) -> None:
        """Looks up the run's result artifact once it can no longer change."""
        run = self._runs[run_id]
        async with run.lock:
            if run.artifact_known:
                return
            path = f"/repos/{self._repo}/actions/runs/{run_id}/artifacts"
            params = {"name": RESULT_ARTIFACT, "per_page": str(PER_PAGE)}
            answer = await self._pool.call(get(path, params))
            run.artifact = next(
                (
                    a
                    for a in answer_field(answer.data, "artifacts", list)
                    if a.get("name") == RESULT_ARTIFACT and not a.get("expired")
                ),
                None,
            )
            run.artifact_known = run.artifact is not None or run.status == "completed"

    def _observe(self, data: Any, seen_at: float) -> None:
        run = self._runs.get(str(data.get("id"))) if isinstance(data, dict) else None
        if run is None:
            return
        run.data = data
        run.seen_at = max(run.seen_at, seen_at)
        last = run.events[-1]["status"] if run.events else None
        if data.get("status") != last:
            event = {"event": "status", "status": data.get("status")}
            if data.get("conclusion"):
                event["conclusion"] = data["conclusion"]
            run.events.append(event)

    def _state(self, run_id: str | None) -> RunState:
        if run_id is None:
            # A key no run is named with, in a list fetched after we learned of the key.
            return RunState.LOST
        run = self._runs[run_id]
        if run.gone:
            return RunState.LOST
        if run.status is None:
            return RunState.QUEUED  # dispatched, not listed yet
        if run.status != "completed":
            return RunState.RUNNING if run.status in RUNNING_STATUSES else RunState.QUEUED
        return RunState.FINISHED if run.artifact is not None else RunState.LOST

    def _needs_poll(self, external_id: str) -> bool:
        run_id = self.resolve(external_id)
        return run_id is None or not self._runs[run_id].final

    def _list_due(self, ids: Iterable[str]) -> float:
        """A list started after this time will do: one per poll interval, and for a key not
        resolved yet one fetched after the key was first asked about. A run dispatched here and
        never listed wants one list fetched after its dispatch: the one before cannot show it,
        and waiting a whole interval would add that interval to every run that ends quickly."""
        newer_than = self._clock() - self._poll_interval
        for external_id in ids:
            run_id = self.resolve(external_id)
            run = None if run_id is None else self._runs[run_id]
            if run is None and external_id in self._keys:
                newer_than = max(newer_than, self._keys[external_id])
            elif run is not None and run.dispatched_here and run.data is None:
                newer_than = max(newer_than, run.tracked_at)
        return newer_than

    # --- ids ------------------------------------------------------------------------------------

    def _track_handle(self, external_id: str) -> None:
        if external_id.isdigit():
            self.track(external_id)
        else:  # a dispatch key: remember when it was first asked about
            self._keys.setdefault(external_id, self._clock())

    def _titled(self, key: str) -> str | None:
        title = RUN_NAME.format(key=key)
        for data in self._page:
            # `display_title` is the run-name; some answers carry it as `name` too.
            if title in (data.get("display_title"), data.get("name")):
                return str(data["id"])
        return None

    def _adopt(self, run_id: str) -> None:
        """Tracks a run found by its key, with what the latest list said about it."""
        self.track(run_id)
        for data in self._page:
            if str(data.get("id")) == run_id:
                self._observe(data, self._list_started)
