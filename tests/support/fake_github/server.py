"""A fake GitHub REST API on 127.0.0.1 that behaves like a repository with self-hosted runners.

Only the endpoints the GitHub launcher uses exist. A dispatched run really executes the runner
entrypoint (`python -m cluster_manager.harness.runner --payload ... --output result.json`) in a
worker thread, as a self-hosted runner would, and its `result.json` becomes the run's `result`
artifact. Knobs make runs slow, stuck or instant (a canned result), and inject 5xx bursts,
rate limits and slow answers. Every request is counted by (method, route).

The repository has the secret CLUSTER_MANAGER_PAYLOAD_KEY (`payload_key`, fresh per fake), and
the runner gets it in its environment as the workflows' runner step does; results are sealed
with it like the runner's. A fake made with `payload_key=None` is a repository without it.

    with FakeGitHub(queue_delay=0.5) as github:
        launcher = GitHubLauncher(
            "acme/kernels", ["t1"], base_url=github.base_url, payload_key=github.payload_key
        )
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cluster_manager.core.payload import (
    GITHUB_INPUTS_LIMIT,
    seal_result,
)
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sealed import KEY_ENV, generate_key

_FRESH_KEY = "fresh"  # the default of `payload_key`: a new key for each fake

REQUIRED_INPUTS = ("payload", "job_id", "runner_labels")
DEFAULT_WORKFLOWS = {"nvidia_workflow.yml": "NVIDIA", "amd_workflow.yml": "AMD"}
RATE_LIMIT = 5000
PRIMARY_LIMIT_MESSAGE = "API rate limit exceeded for user ID 1."
SECONDARY_LIMIT_MESSAGE = "You have exceeded a secondary rate limit. Please wait a few minutes."

_REPO = r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
# (method, route name, path pattern): the route name is what the counters are keyed by.
ROUTES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (method, name, re.compile(pattern + r"/?"))
    for method, name, pattern in (
        ("GET", "repo", _REPO),
        ("GET", "workflow", _REPO + r"/actions/workflows/(?P<workflow>[^/]+)"),
        ("POST", "dispatch", _REPO + r"/actions/workflows/(?P<workflow>[^/]+)/dispatches"),
        ("GET", "runs", _REPO + r"/actions/runs"),
        ("GET", "run", _REPO + r"/actions/runs/(?P<run_id>\d+)"),
        ("GET", "artifacts", _REPO + r"/actions/runs/(?P<run_id>\d+)/artifacts"),
        ("GET", "zip", _REPO + r"/actions/artifacts/(?P<artifact_id>\d+)/zip"),
        ("POST", "cancel", _REPO + r"/actions/runs/(?P<run_id>\d+)/cancel"),
        ("GET", "blob", r"/_blobs/(?P<artifact_id>\d+)"),
    )
)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def zip_bytes(files: dict[str, bytes]) -> bytes:
    """A zip archive holding `files`, as upload-artifact would make it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def _json(status: int, data: Any, **headers: str) -> Reply:
    body = json.dumps(data).encode()
    return Reply(status, body, {"Content-Type": "application/json; charset=utf-8", **headers})


def _error(status: int, message: str, **headers: str) -> Reply:
    return _json(
        status, {"message": message, "documentation_url": "https://docs.github.com"}, **headers
    )


@dataclass
class FakeRun:
    id: int
    workflow: str
    inputs: dict[str, str]
    created_at: str
    status: str = "queued"
    conclusion: str | None = None
    updated_at: str = ""
    run_started_at: str | None = None
    artifact_id: int | None = None
    artifact: bytes | None = None
    stderr: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def job_id(self) -> str:
        return self.inputs["job_id"]


@dataclass
class Fault:
    remaining: int
    status: int
    route: str | None


@dataclass(frozen=True)
class RequestRecord:
    at: float  # time.monotonic()
    method: str
    route: str
    status: int
    token: str | None


class FakeGitHub:
    """The fake server. Settable attributes are read on every request or run, so tests may
    change them at any time: `queue_delay`, `runner_delay`, `canned`, `stuck`, `slowness`,
    `return_run_details`, `redirect_downloads`, `artifact_override`, `fail_runs`."""

    def __init__(
        self,
        *,
        owner: str = "acme",
        repo: str = "kernels",
        tokens: Sequence[str] = ("t1", "t2"),
        workflows: dict[str, str] | None = None,
        ref: str = "main",
        queue_delay: float = 0.0,
        runner_delay: float = 0.0,
        canned: RunResult | None = None,
        return_run_details: bool = True,
        redirect_downloads: bool = True,
        payload_key: str | None = _FRESH_KEY,
    ) -> None:
        self.owner, self.repo, self.ref = owner, repo, ref
        # The repository secret the workflows hand to the runner step.
        self.payload_key = generate_key() if payload_key == _FRESH_KEY else payload_key
        self.tokens = set(tokens)
        self.workflows = dict(workflows or DEFAULT_WORKFLOWS)
        self.queue_delay = queue_delay  # seconds a run waits for a runner
        self.runner_delay = runner_delay  # extra seconds a run takes on the runner
        self.canned = canned  # a result returned at once instead of executing the runner
        self.stuck = False  # runs stay queued (until cancelled)
        self.slowness = 0.0  # seconds slept before answering any request
        self.return_run_details = return_run_details  # False: dispatch answers 204
        self.redirect_downloads = redirect_downloads  # the zip endpoint answers 302 like GitHub
        self.artifact_override: bytes | None = None  # bytes served instead of every artifact
        self.fail_runs = False  # runs conclude `failure` without an artifact
        self.lock = threading.RLock()
        self.runs: dict[int, FakeRun] = {}
        self.log: list[RequestRecord] = []
        self.counts: Counter[tuple[str, str]] = Counter()
        self.not_modified: Counter[str] = Counter()
        self.remaining: Counter[str] = Counter({t: RATE_LIMIT for t in tokens})
        self._faults: list[Fault] = []
        self._limits: dict[str | None, tuple[float, bool]] = {}  # token -> (until, secondary)
        self._next_id = 1000
        self._threads: list[threading.Thread] = []
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> FakeGitHub:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="fake-github", daemon=True
        )
        thread.start()

    def stop(self) -> None:
        with self.lock:
            runs = list(self.runs.values())
            procs = list(self._procs)
        for run in runs:
            run.cancel.set()
        for proc in procs:
            proc.kill()
        for thread in self._threads:
            thread.join(timeout=10)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the fake is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    # --- knobs --------------------------------------------------------------------------------

    def fail_next(self, n: int, status: int = 502, *, route: str | None = None) -> None:
        """The next `n` requests (to `route`, or any) answer `status`."""
        with self.lock:
            self._faults.append(Fault(n, status, route))

    def rate_limit_for(
        self, seconds: float, *, token: str | None = None, secondary: bool = False
    ) -> None:
        """Requests with `token` (or any token) answer 403 for `seconds`: a primary limit
        (`X-RateLimit-Remaining: 0` and the reset time) or a secondary one (`Retry-After`)."""
        with self.lock:
            self._limits[token] = (time.time() + seconds, secondary)

    # --- counters -----------------------------------------------------------------------------

    def requests(
        self, route: str | None = None, *, since: float = 0.0, status: int | None = None
    ) -> list[RequestRecord]:
        with self.lock:
            return [
                r
                for r in self.log
                if (route is None or r.route == route)
                and r.at >= since
                and (status is None or r.status == status)
            ]

    def count(self, route: str | None = None, **kwargs: Any) -> int:
        return len(self.requests(route, **kwargs))

    def run_for(self, job_id: str) -> list[FakeRun]:
        with self.lock:
            return [r for r in self.runs.values() if r.job_id == job_id]

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("the fake GitHub never reached the expected state")
            time.sleep(0.02)

    # --- request handling ---------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> Reply:
        url = urlsplit(raw_path)
        route, params = _match(method, url.path)
        if self.slowness:
            time.sleep(self.slowness)
        token = _token(headers)
        reply = self._answer(method, route, params, parse_qs(url.query), headers, body, token)
        with self.lock:
            self.log.append(RequestRecord(time.monotonic(), method, route, reply.status, token))
            self.counts[(method, route)] += 1
            if reply.status == 304:
                self.not_modified[route] += 1
            elif token in self.remaining and route != "blob":
                self.remaining[token] = max(0, self.remaining[token] - 1)
        if route != "blob":
            reply.headers = {**self._rate_headers(token), **reply.headers}
        return reply

    def _answer(
        self,
        method: str,
        route: str,
        params: dict[str, str],
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
        token: str | None,
    ) -> Reply:
        if route == "unknown":
            return _error(404, "Not Found")
        if route != "blob" and token not in self.tokens:
            return _error(401, "Bad credentials")
        fault = self._take_fault(route)
        if fault is not None:
            return _error(fault, "Server Error")
        limited = self._limited(token) if route != "blob" else None
        if limited is not None:
            return limited
        handler: Callable[..., Reply] = getattr(self, f"_route_{route}")
        return handler(params=params, query=query, headers=headers, body=body)

    def _take_fault(self, route: str) -> int | None:
        with self.lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.route in (None, route):
                    fault.remaining -= 1
                    return fault.status
        return None

    def _limited(self, token: str | None) -> Reply | None:
        with self.lock:
            limit = self._limits.get(token) or self._limits.get(None)
        if limit is None or limit[0] <= time.time():
            return None
        until, secondary = limit
        if secondary:
            wait = str(max(1, math.ceil(until - time.time())))
            return _error(403, SECONDARY_LIMIT_MESSAGE, **{"Retry-After": wait})
        return _error(
            403,
            PRIMARY_LIMIT_MESSAGE,
            **{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(math.ceil(until))},
        )

    def _rate_headers(self, token: str | None) -> dict[str, str]:
        with self.lock:
            remaining = self.remaining.get(token or "", 0)
        return {
            "X-RateLimit-Limit": str(RATE_LIMIT),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Used": str(RATE_LIMIT - remaining),
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
            "X-RateLimit-Resource": "core",
        }

    # --- routes -------------------------------------------------------------------------------

    def _wrong_repo(self, params: dict[str, str]) -> Reply | None:
        if (params.get("owner"), params.get("repo")) != (self.owner, self.repo):
            return _error(404, "Not Found")
        return None

    def _route_repo(self, params: dict[str, str], **_: Any) -> Reply:
        return self._wrong_repo(params) or _json(
            200,
            {
                "id": 1,
                "node_id": "R_1",
                "name": self.repo,
                "full_name": self.full_name,
                "private": True,
                "owner": {"login": self.owner, "id": 1, "type": "Organization"},
                "default_branch": self.ref,
                "url": f"{self.base_url}/repos/{self.full_name}",
                "html_url": f"https://github.com/{self.full_name}",
            },
        )

    def _route_workflow(self, params: dict[str, str], **_: Any) -> Reply:
        wrong = self._wrong_repo(params)
        if wrong is not None or params["workflow"] not in self.workflows:
            return wrong or _error(404, "Not Found")
        return _json(200, self._workflow_json(params["workflow"]))

    def _route_dispatch(self, params: dict[str, str], body: bytes, **_: Any) -> Reply:
        wrong = self._wrong_repo(params)
        if wrong is not None or params["workflow"] not in self.workflows:
            return wrong or _error(404, "Not Found")
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return _error(400, "Problems parsing JSON")
        problem = self._dispatch_problem(data)
        if problem is not None:
            return _error(422, problem)
        run = self.start_run(params["workflow"], data["inputs"])
        if data.get("return_run_details") and self.return_run_details:
            return _json(
                200,
                {
                    "workflow_run_id": run.id,
                    "run_url": f"{self._repo_url()}/actions/runs/{run.id}",
                    "html_url": f"https://github.com/{self.full_name}/actions/runs/{run.id}",
                },
            )
        return Reply(204)

    def _dispatch_problem(self, data: Any) -> str | None:
        """What GitHub would answer 422 for, or None."""
        if not isinstance(data, dict) or data.get("ref") != self.ref:
            return f"No ref found for: {data.get('ref') if isinstance(data, dict) else data}"
        inputs = data.get("inputs")
        if not isinstance(inputs, dict):
            return "Invalid request: inputs must be an object"
        unexpected = sorted(set(inputs) - set(REQUIRED_INPUTS))
        if unexpected:
            return f"Unexpected inputs provided: {unexpected}"
        for name in REQUIRED_INPUTS:
            if not isinstance(inputs.get(name), str) or not inputs[name]:
                return f"Required input '{name}' not provided"
        if sum(len(v) for v in inputs.values()) > GITHUB_INPUTS_LIMIT:
            return f"inputs are too large: at most {GITHUB_INPUTS_LIMIT} characters"
        try:
            labels = json.loads(inputs["runner_labels"])
        except ValueError:
            return "runner_labels is not JSON"
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            return "runner_labels is not a JSON array of strings"
        return None

    def _route_runs(
        self,
        params: dict[str, str],
        query: dict[str, list[str]],
        headers: dict[str, str],
        **_: Any,
    ) -> Reply:
        wrong = self._wrong_repo(params)
        if wrong is not None:
            return wrong
        event = query.get("event", [None])[0]
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = max(int(query.get("page", ["1"])[0]), 1)
        with self.lock:
            runs = sorted(self.runs.values(), key=lambda r: r.id, reverse=True)
            runs = [r for r in runs if event in (None, "workflow_dispatch")]
            listed = [self._run_json(r) for r in runs[(page - 1) * per_page : page * per_page]]
        return _conditional(headers, {"total_count": len(runs), "workflow_runs": listed})

    def _route_run(self, params: dict[str, str], headers: dict[str, str], **_: Any) -> Reply:
        run = self._run(params)
        if run is None:
            return _error(404, "Not Found")
        with self.lock:
            data = self._run_json(run)
        return _conditional(headers, data)

    def _route_artifacts(self, params: dict[str, str], **_: Any) -> Reply:
        run = self._run(params)
        if run is None:
            return _error(404, "Not Found")
        with self.lock:
            artifacts = [] if run.artifact_id is None else [self._artifact_json(run)]
        return _json(200, {"total_count": len(artifacts), "artifacts": artifacts})

    def _route_zip(self, params: dict[str, str], **_: Any) -> Reply:
        wrong = self._wrong_repo(params)
        run = self._run_with_artifact(int(params["artifact_id"]))
        if wrong is not None or run is None:
            return wrong or _error(404, "Not Found")
        if self.redirect_downloads:  # GitHub sends the client to a signed storage URL
            location = f"{self.base_url}/_blobs/{run.artifact_id}?sig=fake"
            return Reply(302, b"", {"Location": location})
        return self._artifact_reply(run)

    def _route_blob(self, params: dict[str, str], **_: Any) -> Reply:
        run = self._run_with_artifact(int(params["artifact_id"]))
        return _error(404, "BlobNotFound") if run is None else self._artifact_reply(run)

    def _route_cancel(self, params: dict[str, str], **_: Any) -> Reply:
        run = self._run(params)
        if run is None:
            return _error(404, "Not Found")
        with self.lock:
            if run.status == "completed":
                return _error(409, "Cannot cancel a workflow run that is completed.")
            self._finish(run, "cancelled")
        run.cancel.set()
        return _json(202, {})

    # --- runs ---------------------------------------------------------------------------------

    def _repo_url(self) -> str:
        return f"{self.base_url}/repos/{self.full_name}"

    def _run(self, params: dict[str, str]) -> FakeRun | None:
        if self._wrong_repo(params) is not None:
            return None
        with self.lock:
            return self.runs.get(int(params["run_id"]))

    def _run_with_artifact(self, artifact_id: int) -> FakeRun | None:
        with self.lock:
            return next((r for r in self.runs.values() if r.artifact_id == artifact_id), None)

    def _artifact_reply(self, run: FakeRun) -> Reply:
        content = self.artifact_override if self.artifact_override is not None else run.artifact
        return Reply(200, content or b"", {"Content-Type": "application/zip"})

    def _workflow_json(self, workflow: str) -> dict[str, Any]:
        return {
            "id": 100 + sorted(self.workflows).index(workflow),
            "node_id": f"W_{workflow}",
            "name": self.workflows[workflow],
            "path": f".github/workflows/{workflow}",
            "state": "active",
            "created_at": "2030-01-01T00:00:00Z",
            "updated_at": "2030-01-01T00:00:00Z",
            "url": f"{self._repo_url()}/actions/workflows/{workflow}",
            "html_url": f"https://github.com/{self.full_name}/actions/workflows/{workflow}",
            "badge_url": f"https://github.com/{self.full_name}/workflows/{workflow}/badge.svg",
        }

    def _run_json(self, run: FakeRun) -> dict[str, Any]:
        url = f"{self._repo_url()}/actions/runs/{run.id}"
        return {
            "id": run.id,
            "name": self.workflows[run.workflow],
            "display_title": f"cm job {run.job_id}",
            "node_id": f"WFR_{run.id}",
            "head_branch": self.ref,
            "head_sha": "0" * 40,
            "path": f".github/workflows/{run.workflow}",
            "run_number": run.id - 999,
            "run_attempt": 1,
            "event": "workflow_dispatch",
            "status": run.status,
            "conclusion": run.conclusion,
            "workflow_id": self._workflow_json(run.workflow)["id"],
            "url": url,
            "html_url": f"https://github.com/{self.full_name}/actions/runs/{run.id}",
            "jobs_url": f"{url}/jobs",
            "logs_url": f"{url}/logs",
            "artifacts_url": f"{url}/artifacts",
            "cancel_url": f"{url}/cancel",
            "rerun_url": f"{url}/rerun",
            "workflow_url": f"{self._repo_url()}/actions/workflows/{run.workflow}",
            "created_at": run.created_at,
            "updated_at": run.updated_at,
            "run_started_at": run.run_started_at,
            "pull_requests": [],
        }

    def _artifact_json(self, run: FakeRun) -> dict[str, Any]:
        url = f"{self._repo_url()}/actions/artifacts/{run.artifact_id}"
        return {
            "id": run.artifact_id,
            "node_id": f"MDg6QXJ0aWZhY3Q{run.artifact_id}",
            "name": "result",
            "size_in_bytes": len(run.artifact or b""),
            "url": url,
            "archive_download_url": f"{url}/zip",
            "expired": False,
            "created_at": run.updated_at,
            "updated_at": run.updated_at,
            "expires_at": "2030-01-04T00:00:00Z",
            "workflow_run": {"id": run.id, "head_branch": self.ref, "head_sha": "0" * 40},
        }

    def start_run(self, workflow: str, inputs: dict[str, str]) -> FakeRun:
        """Starts a run as a dispatch would (tests use it to fill the runs list)."""
        with self.lock:
            self._next_id += 1
            now = _now()
            run = FakeRun(self._next_id, workflow, dict(inputs), now, updated_at=now)
            self.runs[run.id] = run
            thread = threading.Thread(target=self._work, args=(run,), daemon=True)
            self._threads.append(thread)
        thread.start()
        return run

    def _work(self, run: FakeRun) -> None:
        """What a self-hosted runner does: wait to be picked, run the job, upload the result."""
        if run.cancel.wait(self.queue_delay):
            return
        while self.stuck and not run.cancel.wait(0.05):
            pass
        with self.lock:
            if run.cancel.is_set():
                return
            run.status, run.run_started_at, run.updated_at = "in_progress", _now(), _now()
        result = self._execute(run)
        with self.lock:
            if run.status == "completed":  # cancelled meanwhile
                return
            if result is not None:
                self._next_id += 1
                run.artifact_id = self._next_id
                run.artifact = zip_bytes({"result.json": result})
            self._finish(run, "success" if result is not None else "failure")

    def _finish(self, run: FakeRun, conclusion: str) -> None:
        run.status, run.conclusion, run.updated_at = "completed", conclusion, _now()

    def _execute(self, run: FakeRun) -> bytes | None:
        """result.json's bytes, or None when the runner failed or the run was cancelled."""
        if run.cancel.wait(self.runner_delay) or self.fail_runs:
            return None
        canned = self.canned
        if canned is not None:
            return seal_result(json.dumps(canned.to_json()), self.payload_key).encode()
        with tempfile.TemporaryDirectory(prefix="fake-github-run-") as tmp:
            workdir = Path(tmp)
            (workdir / "payload.txt").write_text(run.inputs["payload"], encoding="utf-8")
            code = self._run_runner(run, workdir)
            output = workdir / "result.json"
            if code != 0 or not output.is_file():
                return None
            return output.read_bytes()

    def _runner_env(self) -> dict[str, str]:
        """The runner step's environment: the repository secret, as the workflows pass it."""
        env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
        if self.payload_key is not None:
            env[KEY_ENV] = self.payload_key
        return env

    def _run_runner(self, run: FakeRun, workdir: Path) -> int | None:
        command = [sys.executable, "-m", "cluster_manager.harness.runner"]
        command += ["--payload", "payload.txt", "--output", "result.json"]
        with (workdir / "stderr.txt").open("wb") as stderr:
            proc = subprocess.Popen(
                command,
                cwd=workdir,
                env=self._runner_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
            with self.lock:
                self._procs.add(proc)
            try:
                for _ in _until_exit(proc):
                    if run.cancel.is_set():
                        proc.terminate()
                        proc.wait(timeout=10)
                        return None
            finally:
                with self.lock:
                    self._procs.discard(proc)
        run.stderr = (workdir / "stderr.txt").read_text(errors="replace")[-4000:]
        return proc.returncode


def _until_exit(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    while proc.poll() is None:
        yield
        time.sleep(0.02)


def _conditional(headers: dict[str, str], data: Any) -> Reply:
    """200 with an ETag, or 304 when the client already holds this very answer."""
    body = json.dumps(data).encode()
    etag = f'W/"{hashlib.sha1(body).hexdigest()}"'
    if headers.get("if-none-match") == etag:
        return Reply(304, b"", {"ETag": etag})
    return Reply(200, body, {"Content-Type": "application/json; charset=utf-8", "ETag": etag})


def _match(method: str, path: str) -> tuple[str, dict[str, str]]:
    for route_method, name, pattern in ROUTES:
        found = pattern.fullmatch(path)
        if found and route_method == method:
            return name, found.groupdict()
    return "unknown", {}


def _token(headers: dict[str, str]) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() in ("token", "bearer") and token else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients expect from GitHub

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm and
        # delayed ACKs add 40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake: FakeGitHub = self.server.fake  # type: ignore[attr-defined]
        try:
            reply = fake.handle(method, self.path, headers, body)
        except Exception as exc:  # a bug in the fake must show up as an answer, not a hang
            reply = _error(500, f"fake GitHub failed: {exc!r}")
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        has_body = reply.status not in (204, 304)
        self.send_header("Content-Length", str(len(reply.body) if has_body else 0))
        self.end_headers()
        if has_body and reply.body:
            self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the counters say what happened; stderr stays quiet
