"""Server-sent events: a submission's live progress, then its result.

The client only watches: a client that goes away leaves its submission queued or running,
and the result is stored as for every other front end."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import io
import json
import logging
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from sse_starlette import EventSourceResponse

from cluster_manager.api.client_status import client_status
from cluster_manager.api.models.answers import media_answer
from cluster_manager.api.models.runs import RunView, key_form
from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfilerOutcome
from cluster_manager.core.records import RunRecord
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.waits import within
from cluster_manager.rendering.reports import format_event, format_submission_report
from cluster_manager.service import RateLimitedError, Service, SubmissionReport

log = logging.getLogger(__name__)

STATUS_INTERVAL_S = 3.0  # how often a waiting client hears that we are still at it

Event = dict[str, str]
PING_S = 15  # a comment line now and then keeps proxies from closing a quiet stream


# Live streams one caller may hold open at once: each follows its jobs in the database until
# they end, so an unbounded number from one token is a load anyone could put on the server.
MAX_OPEN_STREAMS = 8


class OpenStreams:
    """The event streams each caller holds open (in this server process); a stream beyond
    `most` is refused before anything is done for it."""

    def __init__(self, most: int = MAX_OPEN_STREAMS) -> None:
        self.most = most
        self._open: Counter[str] = Counter()

    def check(self, caller: str) -> None:
        if self._open[caller] >= self.most:
            raise RateLimitedError(
                f"{self.most} event streams are open with this token already: close one, or "
                "read results at /user/submissions",
                retry_after=timedelta(seconds=STATUS_INTERVAL_S),
            )

    def counted(self, caller: str, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """`events`, counted as one of `caller`'s open streams until it ends or is dropped."""
        self.check(caller)
        self._open[caller] += 1

        async def stream() -> AsyncIterator[Event]:
            try:
                async for event in events:
                    yield event
            finally:
                self._open[caller] -= 1

        return stream()


def streamed(description: str) -> dict[int | str, dict[str, Any]]:
    """How a streaming route states its answer in the OpenAPI schema (it has no model)."""
    return media_answer("text/event-stream", f"Server-sent events: {description}")


# The submit routes' stream, as popcorn-cli reads it.
SUBMISSION_EVENTS = streamed(
    "`status` every few seconds while it runs (`message`, `elapsed_time`), then `result` "
    "(`submission_status`, `results`, `reports`) or `error` (`detail`)"
)


def event_response(events: AsyncIterator[Event]) -> EventSourceResponse:
    # "\n" between lines: popcorn-cli splits messages on a blank line of "\n\n" only.
    return EventSourceResponse(events, sep="\n", ping=PING_S)


def sse(event: str, data: dict[str, Any]) -> Event:
    return {"event": event, "data": json.dumps(data)}


async def submission_stream(
    service: Service, submission_id: int, *, interval_s: float = STATUS_INTERVAL_S
) -> AsyncIterator[Event]:
    """`status` events every `interval_s` with the latest progress, then `result` (or
    `error` when the jobs could not be followed)."""
    started = time.monotonic()
    latest = ["queued"]
    done = asyncio.Event()

    async def follow() -> None:
        try:
            async for event in service.events.watch(submission_id):
                latest[0] = format_event(event)
        finally:
            done.set()

    follower = asyncio.create_task(follow())
    try:
        while not await within(interval_s, done.wait()):
            elapsed = round(time.monotonic() - started, 1)
            status = {"status": "processing", "elapsed_time": elapsed, "message": latest[0]}
            yield sse("status", status)
        if (failure := follower.exception()) is not None:
            error_id = uuid.uuid4().hex[:8]
            log.error("error %s following submission %d", error_id, submission_id, exc_info=failure)
            detail = (
                f"lost track of submission {submission_id} (error id {error_id}); it goes on: "
                f"read it at /user/submissions/{submission_id}"
            )
            yield sse("error", {"status": "error", "detail": detail})
            return
        report = await service.submissions.report(submission_id)
        yield sse(
            "result", result_payload(report, await service.submissions.ranking_holds(submission_id))
        )
    finally:
        follower.cancel()  # the submission goes on; only this client's view of it ends


def result_payload(report: SubmissionReport, holds: dict[str, str]) -> dict[str, Any]:
    stored = report.submission
    title = f"{stored.leaderboard} / {stored.file_name} (submission {stored.id})"
    status, error = client_status(report, holds)
    return {
        "status": "success",
        "submission_id": stored.id,
        "submission_status": status,
        "error": error,
        "results": [_result_item(run) for run in report.runs],
        "reports": [f"{title}\n{format_submission_report(report)}"],
    }


def _result_item(run: RunRecord) -> dict[str, Any]:
    item: dict[str, Any] = {
        "gpu": run.gpu,
        "secret": run.secret,
        "passed": run.passed,
        "verdict": run.verdict.value,
        "score": run.score,
        "runs": {},
    }
    if run.redacted or not run.result:
        return item
    result = RunResult.from_json(run.result)
    if run.mode is Mode.PROFILE:
        item["runs"] = profile_runs(result)
        return item
    for phase in result.phases:
        item["runs"][phase.name] = {
            "run": {
                "success": phase.exit_code == 0,
                "passed": phase.verdict.value == "passed",
                "stdout": phase.stdout,
                "stderr": phase.stderr,
                "exit_code": phase.exit_code,
                "duration": phase.duration_s,
                "result": key_form(result),
            },
            "compilation": None
            if result.compilation is None
            else {"success": result.compilation.success, "stderr": result.compilation.output},
        }
    return item


async def event_stream(service: Service, submission_id: int) -> AsyncIterator[Event]:
    """Our own live view: each `JobEvent` as `job`, then `done` with the final status."""
    async for event in service.events.watch(submission_id):
        yield {"event": "job", "data": json.dumps(event.to_json())}
    report = await service.submissions.report(submission_id)
    status, error = client_status(report, await service.submissions.ranking_holds(submission_id))
    yield sse("done", {"status": status, "error": error, **_runs_of(report)})


def _runs_of(report: SubmissionReport) -> dict[str, Any]:
    jobs = {j.id: j for j in report.jobs}
    return {
        "runs": [RunView.of(r, jobs.get(r.job_id)).model_dump(mode="json") for r in report.runs]
    }


def profile_runs(result: RunResult) -> dict[str, Any]:
    """`profile.N` per benchmark, as popcorn-cli's profile view reads it: the profiler's table
    in the run's result (base64, as `benchmark.0.report`) and a zip of it as the trace. An ncu
    report covers the whole phase: it is in the first case's zip, with its details."""
    runs: dict[str, Any] = {}
    phase = result.phases[-1] if result.phases else None
    profiler = phase.profiler if phase else None
    for n, b in enumerate(result.benchmarks):
        report = b.report or b.error
        if profiler is not None:
            report = f"{report.rstrip()}\n\n{profiler.summary()}\n"
        files = _profile_files(b.index, report, b.trace)
        if profiler is not None and n == 0:
            files.update(_ncu_files(profiler))
        runs[f"profile.{b.index}"] = {
            "run": {
                "success": b.passed,
                "passed": b.passed,
                "stdout": phase.stdout if phase else "",
                "stderr": phase.stderr if phase else "",
                "result": {
                    "benchmark-count": 1,
                    "benchmark.0.spec": b.spec,
                    "benchmark.0.report": _b64(report.encode()),
                },
            },
            "profile": {
                "profiler": profiler.tool if profiler is not None else "torch",
                "trace": _b64(_zip(files)),
            },
        }
    return runs


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _zip(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _ncu_files(profiler: ProfilerOutcome) -> dict[str, str | bytes]:
    """Nsight Compute's report (open it in Nsight Compute's UI) and its details as CSV."""
    files: dict[str, str | bytes] = {}
    with contextlib.suppress(ValueError):
        if profiler.report:
            files["profile.ncu-rep"] = base64.b64decode(profiler.report, validate=True)
    if profiler.details:
        files["profile.ncu-details.csv"] = profiler.details
    return files


def _profile_files(index: int, table: str, trace: str) -> dict[str, str | bytes]:
    """The profiler's table, and its Chrome trace (open it in Perfetto or chrome://tracing)."""
    files: dict[str, str | bytes] = {f"profile.{index}.txt": table}
    if trace:
        with contextlib.suppress(ValueError, OSError):
            raw = gzip.decompress(base64.b64decode(trace, validate=True))
            files[f"profile.{index}.trace.json"] = raw.decode("utf-8", "replace")
    return files
