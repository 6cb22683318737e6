"""The runner samples the GPU during benchmark and ranked phases, not in test mode; a fake
probe is injected through `run(gpu_probe=...)` or, for the entrypoint, the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.core.run_results import RunResult
from cluster_manager.telemetry.choice import PROBE_ENV
from tests.conftest import CORRECT, make_request, run_code
from tests.telemetry.fakes import clean_probe

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_a_benchmark_run_has_telemetry_of_its_benchmark_phase_only(identity_task):
    result = run_code(identity_task, CORRECT, Mode.BENCHMARK, gpu_probe=clean_probe)
    assert result.passed, result.message
    assert list(result.telemetry) == ["benchmark"]  # the test phase before it times nothing
    phase = result.telemetry["benchmark"]
    assert phase.probe == "fake" and phase.device == "Fake GPU"
    assert phase.samples >= 1 and phase.throttled_share == 0
    assert phase.quantities["sm_clock_mhz"].max == 1980


def test_a_test_run_is_not_sampled(identity_task):
    result = run_code(identity_task, CORRECT, Mode.TEST, gpu_probe=clean_probe)
    assert result.passed and result.telemetry == {}


def test_the_entrypoint_samples_the_ranked_phase_with_the_probe_its_environment_names(
    identity_task, tmp_path: Path
):
    request_file = tmp_path / "request.json"
    request = make_request(identity_task, CORRECT, Mode.LEADERBOARD, seed=5)
    request_file.write_text(json.dumps(request.to_json()))
    env = {
        **os.environ,
        PROBE_ENV: "tests.telemetry.fakes:throttled_probe",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "cluster_manager.harness.runner", "--request", str(request_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    result = RunResult.from_json(json.loads(done.stdout))
    assert result.passed, result.message
    assert list(result.telemetry) == ["leaderboard"]
    ranked = result.telemetry["leaderboard"]
    assert ranked.samples >= 1 and ranked.throttled_share == 1.0
    assert ranked.reasons == ("sw_thermal_slowdown",)
