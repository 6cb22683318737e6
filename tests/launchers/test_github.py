"""The GitHub launcher through real PyGithub over HTTP against a fake GitHub whose runs execute
the runner entrypoint: dispatch, polling costs, faults, rate limits, artifacts, re-attaching;
and the workflows it dispatches, checked by actionlint."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import Mode, RunRequest, Task, Verdict
from cluster_manager.core.payload import encode_payload, seal_result
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sealed import generate_key, is_sealed
from cluster_manager.core.task import load_task
from cluster_manager.launchers.base import RunState, RunTimedOutError
from cluster_manager.launchers.github import RESULT_ARTIFACT, RUN_NAME, GitHubLauncher
from tests.conftest import CORRECT, ROOT, make_request, write_task
from tests.support.fake_github import FakeGitHub
from tests.support.fake_github.server import REQUIRED_INPUTS, FakeRun, zip_bytes

NVIDIA = GpuType(
    "H100",
    "github",
    params={"workflow": "nvidia_workflow.yml", "runner_labels": ["self-hosted", "h100"]},
)
CANNED = RunResult(True, Verdict.PASSED, Mode.TEST, "canned result")
POLL = 0.2
WORKFLOWS = [
    ROOT / ".github/workflows/nvidia_workflow.yml",
    ROOT / ".github/workflows/amd_workflow.yml",
]

LauncherFactory = Callable[..., GitHubLauncher]
RUNNER_MODULE = "cluster_manager.harness.runner"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        yield fake


@pytest.fixture
def canned(github: FakeGitHub) -> FakeGitHub:
    """A fake whose runners take no time and answer CANNED."""
    github.canned = CANNED
    return github


@pytest.fixture
def launcher_for(github: FakeGitHub) -> Iterator[LauncherFactory]:
    made: list[GitHubLauncher] = []

    def make(tokens: tuple[str, ...] = ("t1", "t2"), **kwargs: object) -> GitHubLauncher:
        options = {
            "base_url": github.base_url,
            "poll_interval": POLL,
            "write_interval": 0.0,
            "payload_key": github.payload_key,
        }
        launcher = GitHubLauncher(github.full_name, tokens, **{**options, **kwargs})
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.close_clients()


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return load_task(write_task(tmp_path / "identity"))


@pytest.fixture
def request_(task: Task) -> RunRequest:
    return make_request(task, CORRECT)


async def submit_and_follow(
    launcher: GitHubLauncher, request: RunRequest, *, timeout: float = 120, **kwargs: object
) -> RunResult | None:
    handle = await launcher.submit(request, f"job-{uuid.uuid4().hex}", gpu=NVIDIA)
    return await launcher.follow(handle, timeout=timeout, **kwargs)


# --- real runs ------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_correct_submission_runs_on_the_runner_and_passes(
    github: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest
):
    events: list[dict] = []
    result = await submit_and_follow(launcher_for(), request_, on_progress=events.append)

    assert result is not None and result.passed, result and result.message
    assert result.verdict is Verdict.PASSED and len(result.tests) == 2
    (run,) = github.runs.values()
    assert json.loads(run.inputs["runner_labels"]) == ["self-hosted", "h100"]
    assert run.conclusion == "success"
    assert github.count("dispatch") == 1 and github.count("blob") == 1  # followed the 302
    assert [e["status"] for e in events][-1] == "completed"


@pytest.mark.slow
async def test_a_wrong_answer_comes_back_with_its_verdict(
    github: FakeGitHub, launcher_for: LauncherFactory, task: Task
):
    wrong = "def custom_kernel(data):\n    return data + 1\n"
    result = await submit_and_follow(launcher_for(), make_request(task, wrong))

    assert result is not None and not result.passed
    assert result.verdict is Verdict.WRONG_ANSWER
    assert "mismatch" in result.message


# --- dispatching ----------------------------------------------------------------------------


async def test_a_dispatch_answered_without_run_details_finds_the_run_by_name(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest
):
    canned.return_run_details = False
    launcher = launcher_for()
    handle = await launcher.submit(request_, "job-7-attempt-1", gpu=NVIDIA)

    (run,) = canned.runs.values()
    assert handle.external_id == str(run.id)
    assert canned.requests("dispatch")[0].status == 204
    assert await launcher.follow(handle, timeout=30) == CANNED


@pytest.mark.reliability(
    "Faults",
    "two successor workers dispatch the same key to GitHub again while the first run is queued",
    "one dispatch, one run; every worker gets the same run id",
)
async def test_the_same_key_submitted_twice_starts_one_run(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.queue_delay = 1.0
    first = await launcher_for().submit(request_, "job-1-attempt-1", gpu=NVIDIA)
    again = await launcher_for().submit(request_, "job-1-attempt-1", gpu=NVIDIA)  # a successor
    same = await launcher_for().submit(request_, "job-1-attempt-1", gpu=NVIDIA)

    record_property(
        "observed",
        f"{canned.count('dispatch')} dispatch, {len(canned.runs)} run; "
        f"run ids {sorted({first.external_id, again.external_id, same.external_id})}",
    )
    assert first == again == same
    assert canned.count("dispatch") == 1 and len(canned.runs) == 1


async def test_an_oversized_payload_is_refused_before_any_request(
    github: FakeGitHub, launcher_for: LauncherFactory, task: Task
):
    incompressible = f"# {secrets.token_urlsafe(60_000)}\n{CORRECT}"
    with pytest.raises(LauncherError, match=r"GitHub accepts at most 65,535 — make the"):
        await launcher_for().submit(make_request(task, incompressible), "big", gpu=NVIDIA)
    assert github.count() == 0


async def test_a_gpu_type_without_workflow_parameters_is_refused(
    github: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest
):
    bare = GpuType("H100", "github")
    with pytest.raises(LauncherError, match="no 'workflow' parameter"):
        await launcher_for().submit(request_, "job-1", gpu=bare)
    assert github.count() == 0


# --- polling costs --------------------------------------------------------------------------


async def test_many_followers_share_one_runs_list_per_poll_interval(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest
):
    canned.queue_delay = 2.0  # in flight for ~10 poll intervals
    launcher = launcher_for(poll_interval=0.25)
    handles = await asyncio.gather(
        *(launcher.submit(request_, f"job-{i}-attempt-1", gpu=NVIDIA) for i in range(20))
    )
    began = time.monotonic()
    results = await asyncio.gather(*(launcher.follow(h, timeout=60) for h in handles))
    window = time.monotonic() - began

    assert results == [CANNED] * 20
    lists = canned.count("runs", since=began)
    assert lists <= window / 0.25 + 1, (lists, window)
    assert canned.count("runs", since=began, status=304) >= 3  # the unchanged lists were free
    assert canned.count("run", since=began) == 0  # every run was on the list's first page
    assert canned.count("dispatch") == 20
    assert canned.count("artifacts") == 20 and canned.count("zip") == 20
    assert canned.count(since=began) == lists + 3 * 20  # plus artifacts, zip and its redirect


async def test_a_run_missing_from_the_first_page_is_fetched_on_its_own(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest
):
    handle = await launcher_for().submit(request_, "job-old", gpu=NVIDIA)
    inputs = {"payload": "x", "job_id": "other", "runner_labels": "[]"}
    for _ in range(100):  # newer runs push ours off the first page
        canned.start_run("nvidia_workflow.yml", inputs)
    canned.wait_until(lambda: all(r.status == "completed" for r in canned.runs.values()))

    fresh = launcher_for()
    assert await fresh.follow(fresh.attach(handle.external_id), timeout=30) == CANNED
    assert canned.count("run") >= 1


@pytest.mark.reliability(
    "Faults",
    "a GitHub run fails without uploading its result artifact",
    "the run is lost (no result), for the scheduler to retry",
)
async def test_a_run_that_fails_without_a_result_is_lost(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.fail_runs = True
    result = await submit_and_follow(launcher_for(), request_, timeout=30)
    conclusions = [run.conclusion for run in canned.runs.values()]
    record_property("observed", f"run conclusion {conclusions}; follow returned {result!r} (lost)")
    assert result is None


# --- faults ---------------------------------------------------------------------------------


@pytest.mark.reliability(
    "Faults",
    "GitHub 5xx bursts: 2× 502 on dispatch, 3× 503 on the runs list, 1× 500 on the artifact zip",
    "retried: one run, and its result comes back",
)
async def test_5xx_bursts_during_dispatch_and_polling_are_survived(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.queue_delay = 0.5
    canned.fail_next(2, 502, route="dispatch")
    launcher = launcher_for()
    handle = await launcher.submit(request_, "job-5xx", gpu=NVIDIA)
    canned.fail_next(3, 503, route="runs")
    canned.fail_next(1, 500, route="zip")

    result = await launcher.follow(handle, timeout=60)
    failed = len([r for r in canned.requests() if r.status >= 500])
    record_property(
        "observed",
        f"{failed} 5xx answers retried; {len(canned.runs)} run; "
        f"result {result.verdict.value if result else None}",
    )
    assert result == CANNED
    assert canned.count("dispatch", status=502) == 2 and len(canned.runs) == 1
    assert canned.count("runs", status=503) == 3 and canned.count("zip", status=500) == 1


@pytest.mark.reliability(
    "Faults",
    "GitHub starts the run but answers the dispatch only after the 1 s request timeout",
    "the timed-out dispatch is retried after looking again: one run, and its result comes back",
)
async def test_a_dispatch_answered_after_the_timeout_starts_one_run(
    canned: FakeGitHub,
    launcher_for: LauncherFactory,
    request_: RunRequest,
    monkeypatch: pytest.MonkeyPatch,
    record_property,
):
    delay = 10.0
    answer = canned.handle
    slowed: list[str] = []

    def late_dispatch(method: str, path: str, headers: dict[str, str], body: bytes):
        reply = answer(method, path, headers, body)  # the run starts here...
        if path.endswith("/dispatches") and not slowed:
            slowed.append(path)
            time.sleep(delay)  # ...and the answer leaves long after the client gave up
        return reply

    monkeypatch.setattr(canned, "handle", late_dispatch)
    # The late answer meets a closed connection: no broken-pipe traceback on stderr, even after
    # the test has ended.
    assert canned._server is not None
    canned._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    launcher = launcher_for(request_timeout=3.0)
    began = time.monotonic()
    handle = await launcher.submit(request_, "job-late", gpu=NVIDIA)
    submitted = time.monotonic() - began
    result = await launcher.follow(handle, timeout=60)

    record_property(
        "observed",
        f"gave up on the answer and found the run after {submitted:.1f} s; "
        f"{canned.count('dispatch')} dispatch, {len(canned.runs)} run; "
        f"result {result.verdict.value if result else None}",
    )
    assert slowed, "the dispatch was never slowed down"
    assert submitted < delay  # it did not wait for the late answer
    assert result == CANNED
    assert canned.count("dispatch") == 1 and len(canned.runs) == 1


@pytest.mark.reliability(
    "Faults",
    "one of two GitHub tokens is rate-limited for 30 s",
    "the other token carries on; the limited one is not asked again before its reset",
)
async def test_a_rate_limited_token_is_set_aside_for_the_next(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.rate_limit_for(30, token="t1")
    result = await submit_and_follow(launcher_for(("t1", "t2")), request_, timeout=30)

    answered = sorted({r.token for r in canned.requests() if r.status < 400})
    record_property(
        "observed",
        f"{len(canned.requests(status=403))} 403 on t1, then every answered request on "
        f"{', '.join(map(str, answered))}; result {result.verdict.value if result else None}",
    )
    assert result == CANNED
    assert len(canned.requests(status=403)) == 1  # t1 is not asked again before its reset
    assert {r.token for r in canned.requests() if r.status < 400} == {"t2"}


@pytest.mark.parametrize("secondary", [False, True], ids=["primary", "secondary"])
@pytest.mark.reliability(
    "Faults",
    "the only GitHub token is rate-limited for 1.2 s",
    "waits for the reset (at most 2 refusals), then the run completes",
)
async def test_a_single_rate_limited_token_waits_for_the_reset(
    canned: FakeGitHub,
    launcher_for: LauncherFactory,
    request_: RunRequest,
    secondary: bool,
    record_property,
):
    canned.rate_limit_for(1.2, secondary=secondary)
    began = time.monotonic()
    result = await submit_and_follow(launcher_for(("t1",)), request_, timeout=30)

    record_property(
        "observed",
        f"{len(canned.requests(status=403))} 403, waited; run completed after "
        f"{time.monotonic() - began:.1f} s with {result.verdict.value if result else None}",
    )
    assert result == CANNED
    assert time.monotonic() - began >= 1.0
    assert len(canned.requests(status=403)) <= 2  # waited instead of hammering


@pytest.mark.reliability(
    "Faults",
    "a rate-limit storm: every GitHub token limited for 10 min, more than the 5 s it may wait",
    "a clear error at once, one refusal per token, no hammering",
)
async def test_every_token_limited_for_too_long_is_an_error(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.rate_limit_for(600)
    launcher = launcher_for(("t1", "t2"), max_rate_limit_wait=5)
    with pytest.raises(LauncherError, match="rate-limited for another") as raised:
        await launcher.submit(request_, "job-limited", gpu=NVIDIA)
    record_property(
        "observed", f"{raised.value} ({len(canned.requests(status=403))} requests refused)"
    )
    assert len(canned.requests(status=403)) == 2


@pytest.mark.reliability(
    "Faults",
    "no runner ever picks the GitHub run up (stuck queued)",
    "RunTimedOutError at the timeout, and the run is cancelled on GitHub",
)
async def test_a_run_stuck_in_the_queue_is_cancelled_at_the_timeout(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.stuck = True
    with pytest.raises(RunTimedOutError) as raised:
        await submit_and_follow(launcher_for(), request_, timeout=1.0)

    (run,) = canned.runs.values()
    record_property("observed", f"{raised.value}; run {run.status}/{run.conclusion}")
    assert canned.count("cancel") == 1
    assert (run.status, run.conclusion) == ("completed", "cancelled")


def _sealed_result(text: str) -> Callable[[str], bytes]:
    """An artifact whose result.json is `text` sealed with the repository's key."""
    return lambda key: zip_bytes({"result.json": seal_result(text, key).encode()})


@pytest.mark.parametrize(
    ("artifact", "message"),
    [
        (lambda key: b"this is not a zip", "not a valid zip"),
        (lambda key: zip_bytes({"other.txt": b"{}"}), "holds no result.json"),
        (_sealed_result("{not json"), "result.json is not valid JSON"),
        (_sealed_result('{"passed": true}'), "not a valid run result"),
    ],
    ids=["garbage", "no-result-json", "invalid-json", "not-a-run-result"],
)
@pytest.mark.reliability(
    "Faults",
    "the GitHub result artifact is corrupt",
    "a LauncherError naming what is wrong; no result is recorded",
)
async def test_a_corrupt_artifact_is_a_clear_error(
    canned: FakeGitHub,
    launcher_for: LauncherFactory,
    request_: RunRequest,
    artifact: Callable[[str], bytes],
    message: str,
    record_property,
):
    canned.artifact_override = artifact(canned.payload_key)
    with pytest.raises(LauncherError, match=message) as raised:
        await submit_and_follow(launcher_for(), request_, timeout=30)
    record_property("observed", str(raised.value))


# --- re-attaching ---------------------------------------------------------------------------


@pytest.mark.reliability(
    "Faults",
    "a restarted worker re-attaches to its GitHub run by run id, or by dispatch key alone",
    "finds the run and fetches its result; an attempt that was never dispatched is lost",
)
async def test_a_fresh_launcher_attaches_to_a_finished_run(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    handle = await launcher_for().submit(request_, "job-3-attempt-1", gpu=NVIDIA)
    canned.wait_until(lambda: all(r.status == "completed" for r in canned.runs.values()))

    by_id = launcher_for()  # as if the process had restarted
    attached = by_id.attach(handle.external_id)
    assert await by_id.states([attached]) == {handle.external_id: RunState.FINISHED}
    assert await by_id.result(attached) == CANNED

    by_key = launcher_for()  # a worker that died before learning the run id
    keyed, unknown = by_key.attach("job-3-attempt-1"), by_key.attach("job-3-attempt-2")
    states = await by_key.states([keyed, unknown])
    record_property(
        "observed", "re-attached: " + ", ".join(f"{k} {v.value}" for k, v in sorted(states.items()))
    )
    assert states == {
        "job-3-attempt-1": RunState.FINISHED,
        "job-3-attempt-2": RunState.LOST,
    }
    assert await by_key.result(keyed) == CANNED


async def test_cancelling_a_finished_run_is_harmless(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest
):
    launcher = launcher_for()
    handle = await launcher.submit(request_, "job-done", gpu=NVIDIA)
    canned.wait_until(lambda: all(r.status == "completed" for r in canned.runs.values()))
    await launcher.cancel(handle)
    assert canned.requests("cancel")[0].status == 409


def test_requests_without_a_token_are_refused(github: FakeGitHub):
    reply = github.handle("GET", f"/repos/{github.full_name}/actions/runs", {}, b"")
    assert reply.status == 401


# --- nothing readable outside --------------------------------------------------------------

CODE_MARKER = "kernel-marker-7f3a9c51"  # a comment in the submission's code
SEED = 1_739_184_265  # the ranked run's secret seed (31 bits, as leaderboards draw them)
RESULT_MARKER = "result-marker-5be1c0d2"


def _readable(text: str) -> str:
    """What anyone can read from `text` without the key: the text, and whatever a base64
    decoding (of it, or of what follows a prefix) and then zlib make of it."""
    found = [text]
    for candidate in (text, text.partition(":")[2]):
        for altchars in (None, b"-_"):
            try:
                raw = base64.b64decode(candidate + "=" * (-len(candidate) % 4), altchars)
            except ValueError:
                continue
            found.append(raw.decode("latin-1"))
            with contextlib.suppress(zlib.error):
                found.append(zlib.decompress(raw).decode("utf-8", "replace"))
    return "\n".join(found)


def _shown_inputs(run: FakeRun) -> str:
    return "\n".join(_readable(value) for value in run.inputs.values())


def _artifact_text(run: FakeRun) -> str:
    """result.json as anyone who downloads the artifact reads it."""
    assert run.artifact is not None, run.stderr
    with zipfile.ZipFile(io.BytesIO(run.artifact)) as archive:
        return archive.read("result.json").decode("utf-8")


@pytest.mark.slow
@pytest.mark.reliability(
    "Access",
    "reading a ranked GitHub run's dispatch inputs (decoded: base64, zlib) without the key, "
    "for a marker in the submission's code, the secret seed's digits and the result",
    "none of them is there: inputs and result.json are sealed; the run still passes",
)
async def test_a_runs_inputs_and_artifact_reveal_neither_code_nor_seed_nor_result(
    github: FakeGitHub, launcher_for: LauncherFactory, task: Task, record_property
):
    request = make_request(task, f"# {CODE_MARKER}\n{CORRECT}", Mode.LEADERBOARD, seed=SEED)
    result = await submit_and_follow(launcher_for(), request)

    (run,) = github.runs.values()
    shown, artifact = _shown_inputs(run), _artifact_text(run)
    record_property(
        "observed",
        f"verdict {result.verdict.value if result else None}; payload "
        f"{run.inputs['payload'][:24]}… ({len(run.inputs['payload']):,} chars), code marker "
        f"{'found' if CODE_MARKER in shown else 'absent'}, seed "
        f"{'found' if str(SEED) in shown else 'absent'}; result.json {artifact[:24]}…",
    )
    assert result is not None and result.passed, result and result.message
    assert CODE_MARKER not in shown and str(SEED) not in shown
    assert is_sealed(artifact) and '"verdict"' not in _readable(artifact)
    # The check has teeth: the unsealed encoding shows both.
    plain = _readable(encode_payload(request))
    assert CODE_MARKER in plain and str(SEED) in plain


# Looks for the payload key wherever a submission might: its environment, and every process's
# environment it can open under /proc (the runner's, the runner step's).
KEY_HUNTER = """
import glob, os

def custom_kernel(data):
    seen = ["own environment"] if "CLUSTER_MANAGER_PAYLOAD_KEY" in os.environ else []
    read = 0
    for path in glob.glob("/proc/*/environ"):
        try:
            with open(path, "rb") as environ:
                text = environ.read()
        except OSError:
            continue
        read += 1
        if b"CLUSTER_MANAGER_PAYLOAD_KEY" in text:
            seen.append(path)
    raise RuntimeError(f"payload key seen in {seen} ({read} environments read)")
"""


@pytest.mark.slow
@pytest.mark.reliability(
    "Access",
    "a submission on a GitHub runner looks for CLUSTER_MANAGER_PAYLOAD_KEY in its environment "
    "and in every /proc/*/environ it can open",
    "found nowhere: the runner's environment is closed to it and its own never had the key",
)
async def test_a_submission_cannot_find_the_payload_key(
    github: FakeGitHub, launcher_for: LauncherFactory, task: Task, record_property
):
    result = await submit_and_follow(launcher_for(), make_request(task, KEY_HUNTER))

    assert result is not None
    found = json.dumps(result.to_json())
    record_property("observed", f"{result.verdict.value}: {result.message[:200]}")
    assert "payload key seen in []" in found, found[:2000]


@pytest.mark.reliability(
    "Access",
    "downloading a GitHub run's result artifact without the key, looking for the result's text",
    "result.json is sealed and holds no trace of it; the launcher opens it with the key",
)
async def test_the_result_artifact_holds_no_readable_result(
    canned: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    canned.canned = RunResult(True, Verdict.PASSED, Mode.TEST, f"passed {RESULT_MARKER}")
    result = await submit_and_follow(launcher_for(), request_, timeout=30)

    (run,) = canned.runs.values()
    artifact = _artifact_text(run)
    record_property(
        "observed",
        f"result.json {artifact[:24]}… ({len(artifact):,} chars), marker "
        f"{'found' if RESULT_MARKER in _readable(artifact) else 'absent'}; the launcher read "
        f"{result.message if result else None!r}",
    )
    assert result is not None and result.message == f"passed {RESULT_MARKER}"
    assert RESULT_MARKER not in _readable(artifact)
    assert RESULT_MARKER.encode() not in (run.artifact or b"")


@pytest.mark.reliability(
    "Access",
    "a GitHub launcher configured without CLUSTER_MANAGER_PAYLOAD_KEY is asked to dispatch",
    "a LauncherError naming the setting; nothing is sent to GitHub",
)
async def test_a_launcher_without_a_payload_key_refuses_to_dispatch(
    github: FakeGitHub, launcher_for: LauncherFactory, request_: RunRequest, record_property
):
    with pytest.raises(LauncherError, match="needs CLUSTER_MANAGER_PAYLOAD_KEY") as raised:
        await launcher_for(payload_key=None).submit(request_, "job-no-key", gpu=NVIDIA)
    record_property("observed", f"{raised.value}; {github.count()} requests")
    assert github.count() == 0


def test_a_malformed_payload_key_is_refused_when_the_launcher_is_made():
    with pytest.raises(LauncherError, match="CLUSTER_MANAGER_PAYLOAD_KEY holds 5 bytes"):
        GitHubLauncher("acme/kernels", ["t1"], payload_key="aGVsbG8")


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        (lambda request, key: json.dumps(CANNED.to_json()), "not sealed with CLUSTER_MANAGER"),
        (
            lambda request, key: seal_result(json.dumps(CANNED.to_json()), generate_key()),
            "sealed with another CLUSTER_MANAGER_PAYLOAD_KEY",
        ),
        (encode_payload, "a sealed payload was given where a result belongs"),
    ],
    ids=["plain", "another-key", "a-payload"],
)
@pytest.mark.reliability(
    "Access",
    "a forged result artifact: plain result.json, one sealed with another key, a request "
    "rather than a result",
    "refused with a LauncherError naming CLUSTER_MANAGER_PAYLOAD_KEY; no result is recorded",
)
async def test_a_result_not_sealed_with_the_key_is_refused(
    canned: FakeGitHub,
    launcher_for: LauncherFactory,
    request_: RunRequest,
    forge: Callable[[RunRequest, str], str],
    message: str,
    record_property,
):
    assert canned.payload_key is not None
    forged = forge(request_, canned.payload_key)
    canned.artifact_override = zip_bytes({"result.json": forged.encode()})
    with pytest.raises(LauncherError, match=message) as raised:
        await submit_and_follow(launcher_for(), request_, timeout=30)
    record_property("observed", str(raised.value))


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("missing", "CLUSTER_MANAGER_PAYLOAD_KEY is not set"),
        ("another", "sealed with another CLUSTER_MANAGER_PAYLOAD_KEY"),
    ],
    ids=["missing", "another"],
)
@pytest.mark.reliability(
    "Access",
    "the runner repository's secret CLUSTER_MANAGER_PAYLOAD_KEY is missing, or differs from "
    "the bot's",
    "the runner refuses the payload with a one-line error naming the secret (no traceback); "
    "no result, so the run is lost",
)
async def test_a_runner_without_the_right_key_says_so(
    request_: RunRequest, secret: str, message: str, record_property
):
    repo_key = None if secret == "missing" else generate_key()
    with FakeGitHub(payload_key=repo_key) as github:
        launcher = GitHubLauncher(
            github.full_name,
            ["t1"],
            base_url=github.base_url,
            poll_interval=POLL,
            write_interval=0.0,
            payload_key=generate_key(),
        )
        try:
            result = await submit_and_follow(launcher, request_, timeout=60)
        finally:
            await launcher.close()
        (run,) = github.runs.values()
    record_property("observed", f"{run.conclusion}, no artifact; runner: {run.stderr.strip()}")
    assert result is None
    assert message in run.stderr
    assert "Traceback" not in run.stderr


async def test_the_size_limit_applies_to_the_sealed_payload(
    github: FakeGitHub,
    launcher_for: LauncherFactory,
    request_: RunRequest,
    monkeypatch: pytest.MonkeyPatch,
):
    from cluster_manager.launchers.github import payloads

    labels = json.dumps(NVIDIA.params["runner_labels"])
    plain = {"payload": encode_payload(request_), "job_id": "k", "runner_labels": labels}
    plain_size = len(json.dumps(plain, separators=(",", ":")))
    # Room for the encoded inputs, not for what sealing adds.
    monkeypatch.setattr(payloads, "GITHUB_INPUTS_LIMIT", plain_size + 8)
    with pytest.raises(LauncherError, match="GitHub accepts at most"):
        await launcher_for().submit(request_, "k", gpu=NVIDIA)
    assert github.count() == 0


# --- the workflows --------------------------------------------------------------------------


def _actionlint() -> str | None:
    beside_python = Path(sys.executable).with_name("actionlint")
    return str(beside_python) if beside_python.exists() else shutil.which("actionlint")


def test_the_workflows_pass_actionlint():
    binary = _actionlint()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("actionlint is missing: install the dev requirements")
        pytest.skip("actionlint is not installed")
    linted = subprocess.run(
        [binary, "-no-color", *map(str, WORKFLOWS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_the_workflows_match_what_the_launcher_expects(path: Path):
    text = path.read_text()
    workflow = yaml.safe_load(text)
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads `on` as true
    inputs = trigger["workflow_dispatch"]["inputs"]

    assert set(inputs) == set(REQUIRED_INPUTS)
    assert all(spec["required"] for spec in inputs.values())
    assert workflow["run-name"] == RUN_NAME.format(key="${{ inputs.job_id }}")
    steps = workflow["jobs"]["run"]["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["name"] == RESULT_ARTIFACT and upload["if"] == "always()"
    assert "inputs.payload" not in text  # read from the event file, never interpolated
    # The payload key reaches the runner step alone.
    # `exec`: no shell stays behind as the runner's parent with the key in its environment.
    keyed = [s for s in steps if "CLUSTER_MANAGER_PAYLOAD_KEY" in s.get("env", {})]
    assert [s["run"].split()[:4] for s in keyed] == [["exec", "python", "-m", RUNNER_MODULE]]
    assert keyed[0]["env"]["CLUSTER_MANAGER_PAYLOAD_KEY"] == (
        "${{ secrets.CLUSTER_MANAGER_PAYLOAD_KEY }}"
    )
    assert text.count("secrets.CLUSTER_MANAGER_PAYLOAD_KEY") == 1
