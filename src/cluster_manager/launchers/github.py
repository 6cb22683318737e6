"""Runs requests on GitHub Actions: one `workflow_dispatch` per run, on self-hosted GPU runners.

The GPU type's parameters name the workflow (`workflow`, e.g. "nvidia_workflow.yml") and the
runner labels (`runner_labels`). The request travels as the `payload` input (core.payload); the
workflow's `run-name` is `cm job <key>`, which is how a run is found again by its dispatch key;
the runner's result.json comes back as the run's artifact named `result`.

Both are sealed with the payload key (core.sealed): everyone who can read the runner repository
sees a run's inputs and artifacts. Without a key the launcher refuses to dispatch; a result not
sealed with it is refused too.

External ids are run ids. A non-numeric external id is taken for a dispatch key and resolved by
run name among the newest runs (a worker that died before learning the run id re-attaches so).
Keys carry the installation's id (core.records.dispatch_key): installations sharing the
repository, or a database made anew, never find each other's runs.

Run states, from the run's `status` and its artifacts:
    queued / waiting / pending / requested -> QUEUED; in_progress -> RUNNING;
    completed with a `result` artifact -> FINISHED, whatever the conclusion (the workflow
    uploads result.json whenever the runner wrote one, even if the job then failed or was
    cancelled; the result itself says whether the submission passed);
    completed without one, or a run GitHub no longer knows -> LOST.

Request budget: one conditional list of the repository's dispatched runs
(`If-None-Match`; an unchanged list is a 304, free of rate limit) per poll interval, shared by
every caller of `states`, plus one right after a dispatch (shared by every run dispatched
before it; that list changed anyway, so the next poll's is more often a free 304); a run
missing from that first page is fetched on its own, also at most once per poll interval;
finished runs are not polled again. Each run costs in addition one list to check its key is
not dispatched yet, the dispatch, one artifact listing and the download.

PyGithub is synchronous: every call runs in a thread, on a client of its own (PyGithub's
connection object is not safe to share between threads). Tokens are used in order; one that
hits a rate limit is set aside until its reset, and when every token is out the launcher waits
for the earliest reset (up to `max_rate_limit_wait`). 5xx answers and network errors are retried
with backoff. Every PyGithub and requests error leaves this module as a `LauncherError`.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import time
import zipfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException
from github.WorkflowRun import WorkflowRun
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
    wait_exponential_jitter,
)

from cluster_manager.core.models import RunRequest, RunResult
from cluster_manager.core.payload import GITHUB_INPUTS_LIMIT, encode_payload, open_result
from cluster_manager.core.sealed import KEY_ENV, SealError, as_key
from cluster_manager.errors import LauncherError
from cluster_manager.gpus import GpuType
from cluster_manager.launchers.base import Launcher, RunHandle, RunState

T = TypeVar("T")
_Call = Callable[["_Client"], "_Answer"]

RESULT_ARTIFACT = "result"
RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 32 * 1024 * 1024
RUN_NAME = "cm job {key}"  # the workflows' run-name
RUNS_PAGE = 100
RUNNING_STATUSES = frozenset({"in_progress"})
# Waits for a run that was dispatched without its id to show up in the runs list.
FIND_ATTEMPTS = 8
TRANSIENT_WAIT = wait_exponential_jitter(multiplier=0.25, max=8, jitter=0.25)


class GitHubRateLimitedError(LauncherError):
    """Every token is rate-limited for longer than the launcher is willing to wait."""


class _HttpError(LauncherError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class _TransientError(LauncherError):
    """A 5xx answer or a network error: worth trying again."""


class _RateLimitError(LauncherError):
    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


@dataclass
class _Client:
    gh: Github
    token: str
    session: requests.Session


@dataclass
class _Token:
    secret: str
    idle: list[_Client] = field(default_factory=list)
    blocked_until: float = -math.inf  # on the launcher's clock


@dataclass
class _Answer:
    status: int
    headers: dict[str, Any]
    data: Any


@dataclass
class _Run:
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
        self._payload_key = _payload_key(payload_key)
        self.base_url = base_url.rstrip("/")
        self.ref = ref
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        # GitHub asks for a pause between content-creating requests (secondary limits).
        self.write_interval = write_interval
        self.max_rate_limit_wait = max_rate_limit_wait
        self._clock = clock
        self._attempts = attempts
        self._tokens = [_Token(t) for t in tokens]
        self._runs: dict[str, _Run] = {}
        self._aliases: dict[str, str] = {}  # dispatch key -> run id
        self._keys: dict[str, float] = {}  # dispatch key -> when first asked about
        self._page: list[dict[str, Any]] = []  # the newest dispatched runs, newest first
        self._list_etag: str | None = None
        self._list_started = -math.inf
        self._list_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()
        self._last_write = -math.inf

    # --- the Launcher interface ---------------------------------------------------------------

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        workflow, labels = _workflow_params(gpu)
        # Refuses a missing key and oversized payloads before any request.
        inputs = _dispatch_inputs(request, key, labels, self._payload_key)
        run_id = await self._dispatch_once(key, workflow, inputs)
        self._track(run_id).dispatched_here = True
        return RunHandle(self.name, run_id)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        ids = {h.external_id for h in handles}
        for external_id in ids:
            self._track_handle(external_id)
        if any(self._needs_poll(i) for i in ids):
            await self._refresh_list(newer_than=self._list_due(ids))
        resolved = {i: self._resolve(i) for i in ids}
        run_ids = {r for r in resolved.values() if r is not None}
        await asyncio.gather(*(self._refresh_unlisted(r) for r in run_ids))
        completed = [r for r in run_ids if self._runs[r].status == "completed"]
        await asyncio.gather(*(self._check_artifact(r) for r in completed))
        return {i: self._state(resolved[i]) for i in ids}

    async def result(self, handle: RunHandle) -> RunResult:
        run_id = await self._run_id(handle.external_id)
        run = self._track(run_id)
        await self._check_artifact(run_id)
        if run.artifact is None:
            raise LauncherError(f"GitHub run {run_id} has no {RESULT_ARTIFACT!r} artifact")
        size = int(run.artifact.get("size_in_bytes") or 0)
        if size > MAX_RESULT_BYTES:
            raise LauncherError(f"GitHub run {run_id}: the result artifact is {size:,} bytes")
        url = f"{self.base_url}/repos/{self.repo}/actions/artifacts/{run.artifact['id']}/zip"
        blob = await self._call(partial(self._download, url=url))
        return _read_result(blob, run_id, self._payload_key)

    async def cancel(self, handle: RunHandle) -> None:
        run_id = self._resolve(handle.external_id)
        if run_id is None:
            return
        path = f"/repos/{self.repo}/actions/runs/{run_id}/cancel"
        try:
            await self._write(partial(_request_json, verb="POST", path=path))
        except _HttpError as exc:
            if exc.status not in (404, 409):  # gone, or already finished: nothing to stop
                raise

    async def progress(self, handle: RunHandle) -> list[dict[str, Any]]:
        """The run's status changes seen while polling (GitHub has no cheap live progress)."""
        run_id = self._resolve(handle.external_id)
        run = self._runs.get(run_id) if run_id is not None else None
        return list(run.events) if run is not None else []

    async def close(self) -> None:
        self.close_clients()

    def close_clients(self) -> None:
        """Closes every idle client's HTTP sessions (PyGithub's and the artifact one)."""
        for token in self._tokens:
            for client in token.idle:
                client.gh.close()
                client.session.close()
            token.idle.clear()

    # --- dispatching --------------------------------------------------------------------------

    async def _dispatch_once(self, key: str, workflow: str, inputs: dict[str, str]) -> str:
        """Dispatches unless a run named with `key` exists. A failed dispatch is retried only
        after looking again: GitHub may have started the run before the error."""
        async for attempt in self._retrying(_TransientError):
            with attempt:
                existing = await self._find_run(key)
                if existing is not None:
                    return existing
                dispatch = partial(self._dispatch, workflow=workflow, inputs=inputs)
                run_id = await self._write(dispatch, retry_transient=False)
                return run_id if run_id is not None else await self._await_run(key)
        raise AssertionError("unreachable")

    def _dispatch(self, client: _Client, *, workflow: str, inputs: dict[str, str]) -> str | None:
        # The client is lazy: neither the repository nor the workflow is fetched.
        repo = client.gh.get_repo(self.repo)
        run = repo.get_workflow(workflow).create_dispatch(
            self.ref, inputs=inputs, throw=True, return_run_details=True
        )
        return str(run.id) if isinstance(run, WorkflowRun) else None

    async def _find_run(self, key: str) -> str | None:
        """The newest run named with `key`, from a runs list started after this call."""
        await self._refresh_list(newer_than=self._clock())
        return self._titled(key)

    async def _await_run(self, key: str) -> str:
        """For a dispatch answered without the run id: waits for the run to be listed."""
        retrying = AsyncRetrying(
            retry=retry_if_result(lambda found: found is None),
            wait=wait_exponential(multiplier=0.25, max=2),
            stop=stop_after_attempt(FIND_ATTEMPTS),
            retry_error_callback=lambda state: None,
        )
        found = await retrying(self._find_run, key)
        if found is None:
            title = RUN_NAME.format(key=key)
            raise LauncherError(f"dispatched, but no run named {title!r} appeared on GitHub")
        return found

    def _titled(self, key: str) -> str | None:
        title = RUN_NAME.format(key=key)
        for data in self._page:
            # `display_title` is the run-name; some answers carry it as `name` too.
            if title in (data.get("display_title"), data.get("name")):
                return str(data["id"])
        return None

    # --- polling ------------------------------------------------------------------------------

    async def _refresh_list(self, *, newer_than: float) -> None:
        """Fetches the runs list unless one started after `newer_than`. Concurrent callers
        wait for the same fetch instead of making their own."""
        async with self._list_lock:
            if self._list_started > newer_than:
                return
            started = self._clock()
            params = {"event": "workflow_dispatch", "per_page": str(RUNS_PAGE)}
            path = f"/repos/{self.repo}/actions/runs"
            answer = await self._call(_get(path, params, self._list_etag))
            if answer.status != 304:
                self._list_etag = answer.headers.get("etag")
                runs = _field(answer.data, "workflow_runs", list)
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
        if self._list_started < run.tracked_at or now - run.fetched_at < self.poll_interval:
            return
        run.fetched_at = now
        path = f"/repos/{self.repo}/actions/runs/{run_id}"
        try:
            answer = await self._call(_get(path, etag=run.etag))
        except _HttpError as exc:
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
            path = f"/repos/{self.repo}/actions/runs/{run_id}/artifacts"
            params = {"name": RESULT_ARTIFACT, "per_page": str(RUNS_PAGE)}
            answer = await self._call(_get(path, params))
            run.artifact = next(
                (
                    a
                    for a in _field(answer.data, "artifacts", list)
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
        run_id = self._resolve(external_id)
        return run_id is None or not self._runs[run_id].final

    def _list_due(self, ids: Iterable[str]) -> float:
        """A list started after this time will do: one per poll interval, and for a key not
        resolved yet one fetched after the key was first asked about. A run dispatched here and
        never listed wants one list fetched after its dispatch: the one before cannot show it,
        and waiting a whole interval would add that interval to every run that ends quickly."""
        newer_than = self._clock() - self.poll_interval
        for external_id in ids:
            run_id = self._resolve(external_id)
            run = None if run_id is None else self._runs[run_id]
            if run is None and external_id in self._keys:
                newer_than = max(newer_than, self._keys[external_id])
            elif run is not None and run.dispatched_here and run.data is None:
                newer_than = max(newer_than, run.tracked_at)
        return newer_than

    # --- ids ----------------------------------------------------------------------------------

    def _track(self, run_id: str) -> _Run:
        return self._runs.setdefault(run_id, _Run(tracked_at=self._clock()))

    def _track_handle(self, external_id: str) -> None:
        if external_id.isdigit():
            self._track(external_id)
        else:  # a dispatch key: remember when it was first asked about
            self._keys.setdefault(external_id, self._clock())

    def _resolve(self, external_id: str) -> str | None:
        """The run id behind an external id: itself, or the run named with a dispatch key."""
        if external_id.isdigit():
            return external_id
        run_id = self._aliases.get(external_id) or self._titled(external_id)
        if run_id is not None and external_id not in self._aliases:
            self._aliases[external_id] = run_id
            self._adopt(run_id)
        return run_id

    def _adopt(self, run_id: str) -> None:
        """Tracks a run found by its key, with what the latest list said about it."""
        self._track(run_id)
        for data in self._page:
            if str(data.get("id")) == run_id:
                self._observe(data, self._list_started)

    async def _run_id(self, external_id: str) -> str:
        run_id = self._resolve(external_id)
        if run_id is None:
            await self._refresh_list(newer_than=self._clock() - self.poll_interval)
            run_id = self._resolve(external_id)
        if run_id is None:
            raise LauncherError(f"no GitHub run is known for {external_id!r}")
        return run_id

    # --- HTTP: tokens, retries, threads ---------------------------------------------------------

    def _retrying(self, *errors: type[BaseException]) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception_type(errors),
            wait=_backoff,
            stop=stop_after_attempt(self._attempts + len(self._tokens)),
            reraise=True,
        )

    async def _call(self, fn: Callable[[_Client], T], *, retry_transient: bool = True) -> T:
        errors: tuple[type[BaseException], ...] = (_RateLimitError,)
        if retry_transient:
            errors += (_TransientError,)
        async for attempt in self._retrying(*errors):
            with attempt:
                return await self._call_once(fn)
        raise AssertionError("unreachable")

    async def _write(self, fn: Callable[[_Client], T], *, retry_transient: bool = True) -> T:
        """A content-creating request, spaced from the previous one by `write_interval`."""
        async with self._write_lock:
            wait = self._last_write + self.write_interval - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                return await self._call(fn, retry_transient=retry_transient)
            finally:
                self._last_write = self._clock()

    async def _call_once(self, fn: Callable[[_Client], T]) -> T:
        token = await self._ready_token()
        client = token.idle.pop() if token.idle else self._new_client(token.secret)
        reusable = True
        try:
            result = await asyncio.to_thread(_guarded, fn, client)
        except asyncio.CancelledError:
            reusable = False  # its thread may still be using it
            raise
        except _RateLimitError as exc:
            token.blocked_until = max(token.blocked_until, self._clock() + exc.delay)
            raise
        finally:
            if reusable:
                token.idle.append(client)
        self._note_quota(token, client)
        return result

    async def _ready_token(self) -> _Token:
        """The first token not known to be exhausted; waits for the earliest reset if all are."""
        while True:
            now = self._clock()
            ready = next((t for t in self._tokens if t.blocked_until <= now), None)
            if ready is not None:
                return ready
            wait = min(t.blocked_until for t in self._tokens) - now
            if wait > self.max_rate_limit_wait:
                raise GitHubRateLimitedError(
                    f"every GitHub token is rate-limited for another {math.ceil(wait)} s"
                )
            await asyncio.sleep(wait)

    def _note_quota(self, token: _Token, client: _Client) -> None:
        """Sets a token aside as soon as an answer says its quota is spent."""
        remaining, _limit = client.gh.requester.rate_limiting
        reset = client.gh.requester.rate_limiting_resettime
        if remaining == 0 and reset:
            token.blocked_until = self._clock() + _until_epoch(reset)

    def _new_client(self, token: str) -> _Client:
        gh = Github(
            auth=Auth.Token(token),
            base_url=self.base_url,
            timeout=math.ceil(self.request_timeout),
            retry=None,  # retries and rate limits are handled here, without blocking a thread
            lazy=True,
            per_page=RUNS_PAGE,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        return _Client(gh, token, requests.Session())

    def _download(self, client: _Client, *, url: str) -> bytes:
        """The artifact's zip. GitHub redirects to a storage URL; requests drops the token
        when the redirect leaves the API host."""
        headers = {
            "Authorization": f"Bearer {client.token}",
            "Accept": "application/vnd.github+json",
            "User-Agent": "cluster-manager",
        }
        with client.session.get(
            url, headers=headers, stream=True, timeout=self.request_timeout
        ) as response:
            if response.status_code >= 400:
                lowered = {k.lower(): v for k, v in response.headers.items()}
                raise _http_error(response.status_code, lowered, _json_or_none(response.text))
            return _bounded(response.iter_content(1 << 16), MAX_RESULT_BYTES)


# --- module helpers ---------------------------------------------------------------------------


def _workflow_params(gpu: GpuType | None) -> tuple[str, list[str]]:
    if gpu is None:
        raise LauncherError("the GitHub launcher needs the GPU type (workflow and runner labels)")
    workflow = gpu.params.get("workflow")
    labels = gpu.params.get("runner_labels")
    if not isinstance(workflow, str) or not workflow:
        raise LauncherError(f"GPU type {gpu.name} has no 'workflow' parameter")
    if (
        not isinstance(labels, list | tuple)
        or not labels
        or not all(isinstance(label, str) for label in labels)
    ):
        raise LauncherError(f"GPU type {gpu.name} needs 'runner_labels', a list of strings")
    return workflow, list(labels)


def _payload_key(key: bytes | str | None) -> bytes | None:
    if key is None:
        return None
    try:
        return as_key(key)
    except SealError as exc:
        raise LauncherError(str(exc)) from None


def _dispatch_inputs(
    request: RunRequest, key: str, labels: list[str], payload_key: bytes | None
) -> dict[str, str]:
    if payload_key is None:
        raise LauncherError(
            f"the GitHub launcher needs {KEY_ENV}: the runner repository shows every run's "
            "inputs and artifacts to its readers, so the submission and the secret seed travel "
            "sealed. Set the same key in the bot's settings and as the repository's secret"
        )
    payload = encode_payload(request, payload_key)
    inputs = {"payload": payload, "job_id": key, "runner_labels": json.dumps(labels)}
    # Measured as the JSON GitHub receives: a little stricter than the values alone.
    size = len(json.dumps(inputs, separators=(",", ":")))
    if size > GITHUB_INPUTS_LIMIT:
        raise LauncherError(
            f"payload is {len(payload):,} characters ({size:,} with the other inputs); GitHub "
            f"accepts at most {GITHUB_INPUTS_LIMIT:,} — make the submission or task smaller"
        )
    return inputs


def _get(path: str, params: dict[str, str] | None = None, etag: str | None = None) -> _Call:
    return partial(_request_json, verb="GET", path=path, params=params, etag=etag)


def _request_json(
    client: _Client,
    *,
    verb: str,
    path: str,
    params: dict[str, str] | None = None,
    etag: str | None = None,
) -> _Answer:
    headers = {"Accept": "application/vnd.github+json"}
    if etag:
        headers["If-None-Match"] = etag
    status, response_headers, body = client.gh.requester.requestJson(
        verb, path, parameters=params, headers=headers
    )
    data = _json_or_none(body)
    if status >= 400:
        raise _http_error(status, response_headers, data)
    if status == 200 and data is None:
        raise LauncherError(f"GitHub answered {verb} {path} with a body that is not JSON")
    return _Answer(status, response_headers, data)


def _guarded(fn: Callable[[_Client], T], client: _Client) -> T:
    """Runs one call in a worker thread; foreign errors become LauncherErrors here."""
    try:
        return fn(client)
    except LauncherError:
        raise
    except GithubException as exc:
        raise _http_error(exc.status, exc.headers or {}, exc.data) from exc
    except requests.RequestException as exc:
        raise _TransientError(f"cannot reach GitHub: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise LauncherError(f"unexpected answer from GitHub: {exc!r}") from exc


def _http_error(status: int, headers: dict[str, Any], data: Any) -> LauncherError:
    message = data.get("message") if isinstance(data, dict) else None
    text = f"GitHub answered {status}" + (f": {message}" if message else "")
    delay = _rate_limit_delay(status, headers, message)
    if delay is not None:
        return _RateLimitError(text, delay)
    if status >= 500:
        return _TransientError(text)
    return _HttpError(text, status)


def _rate_limit_delay(status: int, headers: dict[str, Any], message: str | None) -> float | None:
    """Seconds to leave the token alone, or None when the answer is no rate limit."""
    if status not in (403, 429):
        return None
    retry_after = _number(headers.get("retry-after"))
    if retry_after is not None:  # secondary limits say how long to wait
        return retry_after
    if str(headers.get("x-ratelimit-remaining")) == "0":
        reset = _number(headers.get("x-ratelimit-reset"))
        return _until_epoch(reset) if reset is not None else 60.0
    if status == 429 or "rate limit" in (message or "").lower():
        return 60.0  # GitHub's advice for a secondary limit without Retry-After
    return None


def _until_epoch(epoch: float) -> float:
    return max(0.0, epoch - time.time()) + 0.5  # a little slack for clock skew


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _backoff(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome is not None else None
    if isinstance(error, _RateLimitError):
        return 0.0  # the next token is tried at once; _ready_token waits if none is left
    return TRANSIENT_WAIT(state)


def _json_or_none(body: str | bytes | None) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _field(data: Any, name: str, kind: type) -> Any:
    value = data.get(name) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise LauncherError(f"GitHub's answer has no {name!r}")
    return value


def _bounded(chunks: Iterable[bytes], limit: int) -> bytes:
    parts, total = [], 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise LauncherError(f"the result artifact is larger than {limit:,} bytes")
        parts.append(chunk)
    return b"".join(parts)


def _read_result(blob: bytes, run_id: str, key: bytes | None) -> RunResult:
    """result.json from the artifact's zip, read with a bound, opened with the payload key,
    checked as a RunResult."""
    where = f"GitHub run {run_id}"
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            info = archive.getinfo(RESULT_FILE)
            if info.file_size > MAX_RESULT_BYTES:
                raise LauncherError(f"{where}: {RESULT_FILE} is {info.file_size:,} bytes")
            with archive.open(info) as member:
                raw = member.read(MAX_RESULT_BYTES + 1)
    except KeyError:
        raise LauncherError(f"{where}: the result artifact holds no {RESULT_FILE}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise LauncherError(f"{where}: the result artifact is not a valid zip ({exc})") from exc
    if len(raw) > MAX_RESULT_BYTES:
        raise LauncherError(f"{where}: {RESULT_FILE} is larger than {MAX_RESULT_BYTES:,} bytes")
    try:
        data = json.loads(_opened(raw, key))
    except SealError as exc:
        raise LauncherError(f"{where}: {RESULT_FILE}: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LauncherError(f"{where}: {RESULT_FILE} is not valid JSON ({exc})") from exc
    try:
        return RunResult.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LauncherError(f"{where}: {RESULT_FILE} is not a valid run result ({exc!r})") from exc


def _opened(raw: bytes, key: bytes | None) -> str | bytes:
    """The result's JSON: opened with the key when there is one, else as it came."""
    if key is None:
        return raw
    return open_result(raw.decode("utf-8", errors="replace"), key)
