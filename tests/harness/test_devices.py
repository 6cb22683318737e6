"""One job per GPU: the devices a runner was given reach the submission, pinned, and a run
that needs more than it was given is refused instead of sharing a GPU."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.harness import environment, runner
from cluster_manager.harness.devices import Assignment, assigned, shortage
from cluster_manager.sandbox.plan import unsandboxed
from tests.conftest import make_request

PRINT_ENV = """
import os
for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
             "CLUSTER_MANAGER_DEVICES", "TORCH_CUDA_ARCH_LIST"):
    print(f"{name}={os.environ.get(name)}", flush=True)
def custom_kernel(data):
    return data.clone()
"""


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CLUSTER_MANAGER_DEVICES", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)


@pytest.mark.parametrize(
    ("environ", "devices", "source"),
    [
        ({}, None, ""),
        ({"CUDA_VISIBLE_DEVICES": "0"}, ("0",), "CUDA_VISIBLE_DEVICES"),
        ({"HIP_VISIBLE_DEVICES": "2,3"}, ("2", "3"), "HIP_VISIBLE_DEVICES"),
        ({"ROCR_VISIBLE_DEVICES": "GPU-abc"}, ("GPU-abc",), "ROCR_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE_DEVICES": ""}, (), "CUDA_VISIBLE_DEVICES"),
        (
            {"CLUSTER_MANAGER_DEVICES": " 5, 6 ", "CUDA_VISIBLE_DEVICES": "0"},
            ("5", "6"),
            "CLUSTER_MANAGER_DEVICES",
        ),
    ],
)
def test_the_runner_reads_its_devices_from_its_configuration(
    environ: dict[str, str], devices: tuple[str, ...] | None, source: str
) -> None:
    assert assigned(environ) == Assignment(devices, source)


def test_an_explicit_assignment_replaces_every_visible_devices_variable() -> None:
    env = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1", "ROCR_VISIBLE_DEVICES": "0"}
    pinned = Assignment(("3",), "CLUSTER_MANAGER_DEVICES").pin(env)
    assert pinned == {
        "PATH": "/bin",
        "CUDA_VISIBLE_DEVICES": "3",
        "HIP_VISIBLE_DEVICES": "3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # "3" as nvidia-smi numbers it
    }
    ordered = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    assert Assignment(("3",), "CLUSTER_MANAGER_DEVICES").pin(ordered)["CUDA_DEVICE_ORDER"] == (
        "FASTEST_FIRST"
    )


def test_inherited_vendor_variables_pass_on_as_they_came() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "1"}
    assert Assignment(("1",), "CUDA_VISIBLE_DEVICES").pin(env) == env
    assert Assignment(None).pin(env) == env


@pytest.mark.parametrize(
    ("assignment", "gpu_count", "machine_gpus", "refused"),
    [
        (Assignment(("0",), "CLUSTER_MANAGER_DEVICES"), 1, 8, False),
        (Assignment(("0",), "CLUSTER_MANAGER_DEVICES"), 2, 8, True),
        (Assignment(("0", "1"), "CUDA_VISIBLE_DEVICES"), 2, 8, False),
        (Assignment(None), 8, 8, False),
        (Assignment(None), 9, 8, True),
        # No GPUs at all: ranks are processes on cores; an empty list only says so again.
        (Assignment((), "CUDA_VISIBLE_DEVICES"), 4, 0, False),
        (Assignment(None), 4, 0, False),
    ],
)
def test_a_run_never_gets_fewer_gpus_than_it_needs(
    assignment: Assignment, gpu_count: int, machine_gpus: int, refused: bool
) -> None:
    reason = shortage(assignment, gpu_count, machine_gpus)
    assert (reason is not None) == refused
    if reason is not None:
        assert f"needs {gpu_count} GPU(s)" in reason and "refuses to share GPUs" in reason


def test_the_child_environment_is_pinned_last_and_aimed_at_the_arch(
    identity_task: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("CLUSTER_MANAGER_DEVICES", "2")
    request = dataclasses.replace(make_request(identity_task, ""), arch="sm_90a")
    env = environment.child_env(tmp_path, request, unsandboxed())
    assert env["CUDA_VISIBLE_DEVICES"] == env["HIP_VISIBLE_DEVICES"] == "2"
    assert "CLUSTER_MANAGER_DEVICES" not in env
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0a"


def test_the_pinning_and_the_arch_reach_the_submission(
    identity_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("CLUSTER_MANAGER_DEVICES", "1")
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "0,1")
    request = make_request(identity_task, textwrap.dedent(PRINT_ENV))
    result = runner.run(dataclasses.replace(request, arch="gfx942"))
    assert result.passed, result.message
    stdout = result.phases[0].stdout
    for line in ("CUDA_VISIBLE_DEVICES=1", "HIP_VISIBLE_DEVICES=1", "ROCR_VISIBLE_DEVICES=None"):
        assert line in stdout
    assert "CLUSTER_MANAGER_DEVICES=None" in stdout
    assert result.system["devices"] == "CLUSTER_MANAGER_DEVICES=1"


def test_a_runner_given_one_gpu_refuses_a_two_gpu_run(
    identity_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("CLUSTER_MANAGER_DEVICES", "0")
    monkeypatch.setattr(runner, "system_info", lambda: {"device": "H100", "device_count": 8})
    request: RunRequest = dataclasses.replace(
        make_request(identity_task, "", Mode.BENCHMARK), gpu_count=2
    )
    result = runner.run(request)
    assert result.verdict is Verdict.INTERNAL_ERROR and not result.phases
    assert "needs 2 GPU(s)" in result.message
    assert "given 1 (CLUSTER_MANAGER_DEVICES=0)" in result.message
