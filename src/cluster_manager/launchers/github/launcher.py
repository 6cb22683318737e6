"""The GitHub launcher: dispatches runs, follows them through `RunTracker`, fetches results.

Keys carry the installation's id (core.records.dispatch_key): installations sharing the
repository, or a database made anew, never find each other's runs.

Beside the polling (runs.py), each run costs one list to check its key is not dispatched yet,
the dispatch, one artifact listing and the download.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from github.WorkflowRun import WorkflowRun
from tenacity import AsyncRetrying, retry_if_result, stop_after_attempt, wait_exponential

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, RunHandle, RunState
from cluster_manager.launchers.github.client import (
    Client,
    HttpError,
    TokenPool,
    TransientError,
    request_json,
)
from cluster_manager.launchers.github.payloads import (
    MAX_RESULT_BYTES,
    RESULT_ARTIFACT,
    as_payload_key,
    dispatch_inputs,
    read_result,
    workflow_params,
)
from cluster_manager.launchers.github.runs import RUN_NAME, RunTracker

# Waits for a run that was dispatched without its id to show up in the runs list.
FIND_ATTEMPTS = 8


class GitHubLauncher(Launcher):
    name = "github"

    def __init__(
        self,
        repo: str,
        tokens: Sequence[str],
        *,
        base_url: str = "https://api.github.com",
        ref: str = "main",
        poll_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        request_timeout: float = 30.0,
        write_interval: float = 1.0,
        max_rate_limit_wait: float = 300.0,
        attempts: int = 6,
        payload_key: bytes | str | None = None,
    ) -> None:
        if not tokens:
            raise LauncherError("the GitHub launcher needs at least one token")
        if repo.count("/") != 1:
            raise LauncherError(f"GitHub repository must be OWNER/NAME, not {repo!r}")
        self.repo = repo
        self._payload_key = as_payload_key(payload_key)
        self.base_url = base_url.rstrip("/")
        self.ref = ref
        self.poll_interval = poll_interval
        self._pool = TokenPool(
            tokens,
            base_url=self.base_url,
            clock=clock,
            request_timeout=request_timeout,
            write_interval=write_interval,
            max_rate_limit_wait=max_rate_limit_wait,
            attempts=attempts,
        )
        self._runs = RunTracker(self._pool, repo, clock=clock, poll_interval=poll_interval)

    # --- the Launcher interface ---------------------------------------------------------------

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        workflow, labels = workflow_params(gpu)
        # Refuses a missing key and oversized payloads before any request.
        inputs = dispatch_inputs(request, key, labels, self._payload_key)
        run_id = await self._dispatch_once(key, workflow, inputs)
        self._runs.track(run_id).dispatched_here = True
        return RunHandle(self.name, run_id)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        return await self._runs.states({h.external_id for h in handles})

    async def result(self, handle: RunHandle) -> RunResult:
        run_id = await self._runs.run_id(handle.external_id)
        artifact = await self._runs.artifact(run_id)
        if artifact is None:
            raise LauncherError(f"GitHub run {run_id} has no {RESULT_ARTIFACT!r} artifact")
        size = int(artifact.get("size_in_bytes") or 0)
        if size > MAX_RESULT_BYTES:
            raise LauncherError(f"GitHub run {run_id}: the result artifact is {size:,} bytes")
        url = f"{self.base_url}/repos/{self.repo}/actions/artifacts/{artifact['id']}/zip"
        blob = await self._pool.download(url, limit=MAX_RESULT_BYTES)
        return read_result(blob, run_id, self._payload_key)

    async def cancel(self, handle: RunHandle) -> None:
        run_id = self._runs.resolve(handle.external_id)
        if run_id is None:
            return
        path = f"/repos/{self.repo}/actions/runs/{run_id}/cancel"
        try:
            await self._pool.write(partial(request_json, verb="POST", path=path))
        except HttpError as exc:
            if exc.status not in (404, 409):  # gone, or already finished: nothing to stop
                raise

    async def progress(self, handle: RunHandle) -> list[dict[str, Any]]:
        """The run's status changes seen while polling (GitHub has no cheap live progress)."""
        return self._runs.events(handle.external_id)

    async def close(self) -> None:
        self.close_clients()

    def close_clients(self) -> None:
        """Closes every idle client's HTTP sessions (PyGithub's and the artifact one)."""
        self._pool.close()

    # --- dispatching --------------------------------------------------------------------------

    async def _dispatch_once(self, key: str, workflow: str, inputs: dict[str, str]) -> str:
        """Dispatches unless a run named with `key` exists. A failed dispatch is retried only
        after looking again: GitHub may have started the run before the error."""
        async for attempt in self._pool.retrying(TransientError):
            with attempt:
                existing = await self._runs.find(key)
                if existing is not None:
                    return existing
                dispatch = partial(self._dispatch, workflow=workflow, inputs=inputs)
                run_id = await self._pool.write(dispatch, retry_transient=False)
                return run_id if run_id is not None else await self._await_run(key)
        raise AssertionError("unreachable")

    def _dispatch(self, client: Client, *, workflow: str, inputs: dict[str, str]) -> str | None:
        # The client is lazy: neither the repository nor the workflow is fetched.
        repo = client.gh.get_repo(self.repo)
        run = repo.get_workflow(workflow).create_dispatch(
            self.ref, inputs=inputs, throw=True, return_run_details=True
        )
        return str(run.id) if isinstance(run, WorkflowRun) else None

    async def _await_run(self, key: str) -> str:
        """For a dispatch answered without the run id: waits for the run to be listed."""
        retrying = AsyncRetrying(
            retry=retry_if_result(lambda found: found is None),
            wait=wait_exponential(multiplier=0.25, max=2),
            stop=stop_after_attempt(FIND_ATTEMPTS),
            retry_error_callback=lambda state: None,
        )
        found: str | None = await retrying(self._runs.find, key)
        if found is None:
            title = RUN_NAME.format(key=key)
            raise LauncherError(f"dispatched, but no run named {title!r} appeared on GitHub")
        return found
