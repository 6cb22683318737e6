"""popcorn-cli's `popcorn submit`, replayed against a real server on 127.0.0.1: requests built
as its source builds them (src/service/mod.rs: a multipart part `file` with the file's name,
the token in X-Popcorn-Cli-Id, the leaderboard lower-cased), answers parsed as it parses them.
Its polling form (every mode but profile) and its streaming form (profile; older clients
use it for every mode)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.protocol import format_case
from cluster_manager.core.task import load_task
from tests.api.conftest import BOARD, IDENTITY, source, token_of
from tests.support.replay import ReplayLauncher

POLL_S = 0.2  # popcorn-cli waits 5 s between polls; the protocol is the same


class PopcornError(Exception):
    pass


@dataclass
class Popcorn:
    """The client's side of the protocol, step for step."""

    base_url: str
    cli_id: str
    logs: list[str] = field(default_factory=list)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers={"X-Popcorn-Cli-Id": self.cli_id}, timeout=180)

    @staticmethod
    def fail(answer: httpx.Response) -> PopcornError:
        try:
            detail = answer.json().get("detail")
        except ValueError:
            detail = None
        return PopcornError(f"Server returned status {answer.status_code}: {detail or answer.text}")

    async def submit_polling(
        self, leaderboard: str, gpu: str, mode: str, name: str, data: bytes
    ) -> str:
        async with self.client() as http:
            url = f"{self.base_url}/submission/{leaderboard.lower()}/{gpu}/{mode.lower()}"
            answer = await http.post(url, files={"file": (name, data)})
            if not answer.is_success:
                raise self.fail(answer)
            accepted = answer.json()
            submission_id = accepted.get("details", {}).get("id")
            if not isinstance(submission_id, int):
                raise PopcornError("Server did not return a submission id")
            self.logs.append(f"Submission {submission_id} accepted. {_queue(accepted)}")
            while True:
                details = await self.get_user_submission(http, submission_id)
                job = details.get("job") or {}
                status = job.get("status") or ("done" if details.get("done") else "pending")
                self.logs.append(f"Submission {submission_id} status: {status}")
                if status in ("failed", "timed_out", "hacked"):
                    error = job.get("error") or "No error details were provided"
                    raise PopcornError(f"Submission {submission_id} {status}: {error}")
                if details.get("done"):
                    return _format_details(details)
                await asyncio.sleep(POLL_S)

    async def get_user_submission(self, http: httpx.AsyncClient, submission_id: int) -> dict:
        answer = await http.get(f"{self.base_url}/user/submissions/{submission_id}")
        if not answer.is_success:
            raise self.fail(answer)
        details: dict[str, Any] = answer.json()
        for run in details.get("runs") or []:  # as its SubmissionRun is filled
            assert isinstance(run["mode"], str) and isinstance(run["secret"], bool)
            assert isinstance(run["runner"], str) and isinstance(run["passed"], bool)
            assert run["score"] is None or isinstance(run["score"], float | int)
        return details

    async def submit_streaming(
        self, leaderboard: str, gpu: str, mode: str, name: str, data: bytes
    ) -> str:
        async with self.client() as http:
            url = f"{self.base_url}/{leaderboard.lower()}/{gpu}/{mode.lower()}"
            async with http.stream("POST", url, files={"file": (name, data)}) as answer:
                if not answer.is_success:
                    await answer.aread()
                    raise self.fail(answer)
                assert answer.headers["content-type"].startswith("text/event-stream")
                buffer = ""
                async for chunk in answer.aiter_text():
                    buffer += chunk
                    while (end := buffer.find("\n\n")) >= 0:
                        message, buffer = buffer[: end + 2], buffer[end + 2 :]
                        event = data_json = None
                        for line in message.splitlines():
                            if line.startswith("event:"):
                                event = line[len("event:") :].strip()
                            elif line.startswith("data:"):
                                data_json = line[len("data:") :].strip()
                        if event is None or data_json is None:
                            continue
                        if event == "status":
                            self.logs.append(json.loads(data_json).get("message", data_json))
                        elif event == "result":
                            result = json.loads(data_json)
                            return json.dumps(result["reports"])
                        elif event == "error":
                            detail = json.loads(data_json).get("detail", "Unknown server error")
                            raise PopcornError(f"Server processing error: {detail}")
                raise PopcornError(
                    "Stream ended unexpectedly without a final result or error event."
                )


def _queue(accepted: dict) -> str:
    queue = accepted.get("runner_queue") or {}
    if not isinstance(queue.get("queued_jobs"), int):
        return ""
    return f"{queue.get('runner')} {queue.get('gpu')} queue: {queue['queued_jobs']} queued"


def _format_details(details: dict) -> str:
    scope = {True: " (secret)", False: " (public)"}
    lines = [
        f"Geomean score{scope[r['secret']]} on {r['runner']}: {r['score']} s"
        for r in details["runs"]
        if r["mode"] == "leaderboard" and r["score"] is not None
    ]
    return (
        "\n".join(lines)
        + "\n\n"
        + json.dumps({"submission_id": details["id"], "runs": details["runs"]})
    )


@pytest.fixture
async def popcorn(app: App, live_url: str, api: Any) -> Popcorn:
    api.state.status_interval_s = 0.2
    return Popcorn(live_url, await token_of(app, "alice"))


@pytest.mark.usefixtures("scheduler")
async def test_polling_submit_ranks_a_correct_kernel(popcorn: Popcorn, client: httpx.AsyncClient):
    output = await popcorn.submit_polling(
        "IDENTITY", "CPU", "Leaderboard", "submission.py", source()
    )
    assert output.startswith("Geomean score (public) on CPU: ")
    assert "Submission" in popcorn.logs[0] and "local CPU queue:" in popcorn.logs[0]
    ranking = (await client.get(f"/leaderboards/{BOARD}")).json()["rankings"]["CPU"]
    assert [e["user"] for e in ranking] == ["alice"]
    # The client shows the public run's score; the pair ranks with the worse of it and the
    # secret re-run's.
    public = float(output.removeprefix("Geomean score (public) on CPU: ").split(" s")[0])
    assert ranking[0]["score"] >= public


@pytest.mark.usefixtures("scheduler")
async def test_polling_submit_reports_a_wrong_kernel_as_failed(popcorn: Popcorn):
    wrong = (IDENTITY / "wrong" / "wrong_answer.py").read_bytes()
    with pytest.raises(PopcornError, match=r"Submission \d+ failed: CPU: test: test 0 failed: "):
        await popcorn.submit_polling(BOARD, "CPU", "leaderboard", "wrong_answer.py", wrong)


@pytest.mark.usefixtures("scheduler")
async def test_streaming_submit_shows_progress_then_the_report(popcorn: Popcorn):
    reports = json.loads(
        await popcorn.submit_streaming(BOARD, "CPU", "test", "submission.py", source())
    )
    (report,) = reports
    assert report.startswith(f"{BOARD} / submission.py (submission ")
    assert "✅" in report and "passed" in report
    assert popcorn.logs, "no status event reached the client"


@pytest.mark.usefixtures("scheduler")
async def test_streaming_submit_of_a_wrong_kernel_reports_its_failure(popcorn: Popcorn):
    wrong = (IDENTITY / "wrong" / "wrong_answer.py").read_bytes()
    (report,) = json.loads(await popcorn.submit_streaming(BOARD, "CPU", "test", "w.py", wrong))
    assert "❌" in report


async def test_streaming_refusals_come_before_the_stream(popcorn: Popcorn):
    with pytest.raises(PopcornError, match="Server returned status 404: there is no leaderboard"):
        await popcorn.submit_streaming("nope", "CPU", "test", "submission.py", source())


@pytest.mark.reliability(
    "Faults",
    "a popcorn-cli client hanging up at the first progress event of a ranked submission",
    "the submission runs to its end; both runs are stored and it passes",
)
@pytest.mark.usefixtures("scheduler")
async def test_a_client_that_goes_away_mid_stream_loses_nothing(
    app: App, popcorn: Popcorn, live_url: str, replay_launcher: ReplayLauncher
):
    replay_launcher.hold()  # the client hangs up while the runs are in flight
    async with popcorn.client() as http:
        url = f"{live_url}/{BOARD}/CPU/leaderboard"
        async with http.stream("POST", url, files={"file": ("submission.py", source())}) as answer:
            async for chunk in answer.aiter_text():
                if "event: status" in chunk:
                    break  # hang up at the first progress report
    replay_launcher.let_go()
    submission_id = await app.pool.fetchval("SELECT id FROM submissions")
    for _ in range(600):
        report = await app.service.submissions.report(submission_id)
        if report.done:
            break
        await asyncio.sleep(0.1)
    assert report.done and report.passed and len(report.runs) == 2


@pytest.mark.usefixtures("scheduler")
async def test_our_event_stream_follows_a_submission_to_its_end(
    app: App, popcorn: Popcorn, live_url: str
):
    from httpx_sse import aconnect_sse

    # The client's long read timeout: between two job events a run may be quiet for seconds.
    async with popcorn.client() as http:
        accepted = await http.post(
            f"{live_url}/submission/{BOARD}/CPU/test", files={"file": ("s.py", source())}
        )
        submission_id = accepted.json()["details"]["id"]
        url = f"{live_url}/submissions/{submission_id}/events"
        async with aconnect_sse(http, "GET", url) as events:
            seen = [(e.event, e.json()) for e in [e async for e in events.aiter_sse()]]
    states = [data["state"] for kind, data in seen if kind == "job"]
    # From the state it was in when the stream began (under load it may be over already).
    assert states and states[-1] == "finished"
    assert set(states) <= {"queued", "claimed", "dispatched", "running", "finished"}
    kind, done = seen[-1]
    assert kind == "done" and done["status"] == "succeeded" and done["runs"][0]["passed"]


def read_profile_results(result: dict) -> list[tuple[str, str, list[str]]]:
    """As popcorn-cli's profile view: per `profile.*` run, the profiler, the reports decoded
    from the run's result (`benchmark-count` read as an integer) and the trace's files."""
    shown = []
    for item in result["results"]:
        for key, run_data in item["runs"].items():
            if not key.startswith("profile"):
                continue
            profile = run_data["profile"]
            run_result = run_data["run"]["result"]
            count = run_result["benchmark-count"]
            assert isinstance(count, int)
            reports = [
                base64.b64decode(run_result[f"benchmark.{i}.report"]).decode() for i in range(count)
            ]
            with zipfile.ZipFile(io.BytesIO(base64.b64decode(profile["trace"]))) as trace:
                names = trace.namelist()
                if f"{key}.trace.json" in names:  # a Chrome trace, as Perfetto opens it
                    assert "traceEvents" in json.loads(trace.read(f"{key}.trace.json"))
                shown.append((profile["profiler"], "\n".join(reports), names))
    return shown


async def stream_profile(popcorn: Popcorn, route: str, fields: dict[str, str]) -> httpx.Response:
    url = popcorn.base_url + route.format(lb=BOARD, gpu="CPU")
    async with popcorn.client() as http:
        files = {"file": ("submission.py", source())}
        async with http.stream("POST", url, files=files, data=fields) as answer:
            await answer.aread()
            return answer


def result_event(answer: httpx.Response) -> dict:
    line = next(
        line
        for message in answer.text.split("\n\n")
        if "event: result" in message
        for line in message.splitlines()
        if line.startswith("data:")
    )
    return json.loads(line[len("data:") :])


@pytest.mark.usefixtures("scheduler")
@pytest.mark.parametrize("route", ["/{lb}/{gpu}/profile", "/profile/{lb}/{gpu}"])
async def test_profile_streams_the_profilers_table_and_a_trace_zip(popcorn: Popcorn, route: str):
    answer = await stream_profile(popcorn, route, {})
    assert answer.status_code == 200, answer.text
    shown = read_profile_results(result_event(answer))
    assert len(shown) == len(load_task(IDENTITY).benchmarks)
    profiler, report, files = shown[0]
    assert profiler == "torch" and "Self CPU" in report
    assert files == ["profile.0.txt", "profile.0.trace.json"]


@pytest.mark.usefixtures("scheduler")
async def test_profile_of_one_benchmark_case(popcorn: Popcorn):
    answer = await stream_profile(popcorn, "/profile/{lb}/{gpu}", {"benchmark_index": "1"})
    result = result_event(answer)
    (item,) = result["results"]
    (run,) = item["runs"].values()
    expected = load_task(IDENTITY).benchmarks[1]
    spec = run["run"]["result"]["benchmark.0.spec"]
    assert set(spec.split("; ")) == set(format_case(expected).split("; "))  # in any key order


@pytest.mark.parametrize(
    ("fields", "detail"),
    [
        ({"benchmark_index": "9"}, "benchmark index 9 is out of range: 'identity' has 2"),
        ({"benchmark_index": "-1"}, "benchmark_index must be a whole number"),
        ({"ncu_kernel_name": "gemm("}, "ncu_kernel_name: kernel name filter: not a regex"),
    ],
)
async def test_profile_options_that_cannot_be_honoured_are_400(
    app: App, popcorn: Popcorn, fields: dict[str, str], detail: str
):
    answer = await stream_profile(popcorn, "/profile/{lb}/{gpu}", fields)
    assert answer.status_code == 400 and detail in answer.json()["detail"]
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0
