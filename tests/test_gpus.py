"""The GPU registry file: the shipped default and every way an entry can be wrong."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.gpus import (
    DEFAULT_REGISTRY_FILE,
    GPU_MEMORY_MB,
    InvalidRegistryError,
    UnknownGpuError,
    load_registry,
    parse_registry,
)
from cluster_manager.core.models import Limits
from cluster_manager.settings import load_settings, local_limits
from tests.conftest import ROOT


def test_shipped_registry_has_the_promised_gpu_types():
    registry = load_registry(DEFAULT_REGISTRY_FILE)
    assert set(registry.names) == {"B200", "H100", "A100", "L4", "T4", "MI300X", "MI250", "CPU"}
    assert registry.get("CPU").launcher == "local"
    assert registry.get("B200").params["workflow"] == "nvidia_workflow.yml"
    assert registry.get("MI300X").params["workflow"] == "amd_workflow.yml"
    assert "self-hosted" in registry.get("MI250").params["runner_labels"]
    assert {registry.get(g).params["modal_gpu"] for g in ("H100", "A100", "L4", "T4")} == {
        "H100",
        "A100",
        "L4",
        "T4",
    }
    workflows = ROOT / ".github" / "workflows"
    for gpu in registry.types.values():
        if gpu.launcher == "github":
            assert (workflows / gpu.params["workflow"]).is_file(), gpu.params["workflow"]


def test_unknown_gpu_names_the_known_ones():
    registry = load_registry(DEFAULT_REGISTRY_FILE)
    with pytest.raises(UnknownGpuError, match="unknown GPU type 'TPU' \\(known: A100, B200"):
        registry.get("TPU")


def test_concurrency_override_touches_only_that_launcher():
    registry = load_registry(DEFAULT_REGISTRY_FILE).with_concurrency("local", 5)
    assert registry.get("CPU").max_concurrent == 5
    assert registry.get("B200").max_concurrent == 4


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "gpus: must map GPU type names"),
        ({"gpus": {}}, "gpus: must map GPU type names"),
        ({"gpus": {"X": "local"}}, "gpus.X: must be a mapping"),
        ({"gpus": {"X": {"launcher": "ssh"}}}, "gpus.X.launcher: must be one of"),
        ({"gpus": {"bad name": {"launcher": "local"}}}, "gpus.bad name: a GPU type name"),
        ({"gpus": {"X": {"launcher": "local", "max_concurrent": 0}}}, "max_concurrent"),
        ({"gpus": {"X": {"launcher": "local", "max_concurrent": True}}}, "max_concurrent"),
        ({"gpus": {"X": {"launcher": "local", "devices": 0}}}, "gpus.X.devices: must be"),
        ({"gpus": {"X": {"launcher": "local", "devices": "8"}}}, "gpus.X.devices: must be"),
        ({"gpus": {"X": {"launcher": "github", "runner_labels": ["a"]}}}, "needs `workflow`"),
        ({"gpus": {"X": {"launcher": "modal"}}}, "needs `modal_gpu`"),
        (
            {"gpus": {"X": {"launcher": "local", "ranked_per_user_per_hour": 0}}},
            "gpus.X.ranked_per_user_per_hour: must be a positive whole number",
        ),
        (
            {"gpus": {"X": {"launcher": "github", "workflow": "w.yml", "runner_labels": "a"}}},
            "runner_labels: must be a non-empty list",
        ),
    ],
)
def test_invalid_entries_are_named(data, message):
    with pytest.raises(InvalidRegistryError, match="invalid GPU registry") as caught:
        parse_registry(data)
    assert message in str(caught.value)


def test_a_scarce_type_caps_ranked_runs_per_user():
    registry = parse_registry(
        {"gpus": {"B200": {"launcher": "local", "ranked_per_user_per_hour": 1}}}
    )
    assert registry.get("B200").ranked_per_user_per_hour == 1
    assert "ranked_per_user_per_hour" not in registry.get("B200").params


def test_unreadable_or_invalid_files(tmp_path: Path):
    with pytest.raises(InvalidRegistryError, match="cannot read the GPU registry"):
        load_registry(tmp_path / "missing.yml")
    broken = tmp_path / "gpus.yml"
    broken.write_text("gpus: [unclosed")
    with pytest.raises(InvalidRegistryError, match="not valid YAML"):
        load_registry(broken)


def test_limits_come_from_the_registry_and_every_launcher_has_a_memory_cap():
    registry = parse_registry(
        {
            "gpus": {
                "CPU": {"launcher": "local"},
                "H100": {"launcher": "modal", "modal_gpu": "H100"},
                "LAB": {
                    "launcher": "slurm",
                    "limits": {"memory_mb": 2048, "processes": 99, "disk_mb": 512},
                },
            }
        }
    )
    settings = Limits(memory_bytes=8 << 30, compile_timeout=60, disk_bytes=1 << 30)
    assert registry.get("CPU").run_limits(settings).memory_bytes == 8 << 30
    # The local cap is this machine's; every other launcher's runs get the GPU default.
    h100 = registry.get("H100").run_limits(settings)
    assert h100.memory_bytes == GPU_MEMORY_MB << 20 and h100.compile_timeout == 60
    assert h100.disk_bytes == 1 << 30
    lab = registry.get("LAB").run_limits(settings)
    assert (lab.memory_bytes, lab.processes, lab.open_files) == (2048 << 20, 99, 4096)
    assert lab.disk_bytes == 512 << 20


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ([1], "gpus.X.limits: must map memory_mb"),
        ({"gpu_mb": 1}, "gpus.X.limits.gpu_mb: unknown limit"),
        ({"memory_mb": 0}, "gpus.X.limits.memory_mb: must be a positive whole number"),
        ({"processes": "many"}, "gpus.X.limits.processes: must be a positive whole number"),
    ],
)
def test_bad_limits_are_refused_by_name(limits, message):
    with pytest.raises(InvalidRegistryError, match=message):
        parse_registry({"gpus": {"X": {"launcher": "local", "limits": limits}}})


def test_devices_default_to_one_and_to_the_cores_for_the_local_launcher():
    registry = parse_registry(
        {
            "gpus": {
                "B": {"launcher": "slurm"},
                "B8": {"launcher": "slurm", "devices": 8},
                "CPU": {"launcher": "local"},
            }
        }
    )
    assert registry.get("B").devices == 1 and registry.get("B8").devices == 8
    assert registry.get("CPU").devices == (os.cpu_count() or 1)


def test_every_shipped_gpu_type_names_its_exact_compiler_target():
    registry = load_registry(DEFAULT_REGISTRY_FILE)
    arches = {name: registry.get(name).arch for name in registry.names}
    assert arches == {
        "B200": "sm_100a",
        "H100": "sm_90a",
        "A100": "sm_80",
        "L4": "sm_89",
        "T4": "sm_75",
        "MI300X": "gfx942",
        "MI250": "gfx90a",
        "CPU": None,
    }
    assert all("arch" not in registry.get(name).params for name in registry.names)


@pytest.mark.parametrize("arch", ["sm90", "compute_90a", "H100", 90, ["sm_90a"]])
def test_an_arch_that_is_no_target_is_refused(arch):
    with pytest.raises(InvalidRegistryError, match=r"gpus\.X\.arch: must be a GPU target"):
        parse_registry({"gpus": {"X": {"launcher": "local", "arch": arch}}})


def test_the_run_disk_setting_reaches_every_run_and_a_type_may_override_it():
    settings = load_settings({"CLUSTER_MANAGER_RUN_DISK_MB": "1024"}, dotenv_path=None)
    assert local_limits(load_settings({}, dotenv_path=None)).disk_bytes == 4096 << 20
    base = local_limits(settings)
    assert base.disk_bytes == 1024 << 20
    registry = parse_registry(
        {
            "gpus": {
                "B200": {"launcher": "github", "workflow": "w.yml", "runner_labels": ["b200"]},
                "LAB": {"launcher": "slurm", "limits": {"disk_mb": 256}},
            }
        }
    )
    assert registry.get("B200").run_limits(base).disk_bytes == 1024 << 20
    assert registry.get("LAB").run_limits(base).disk_bytes == 256 << 20
    with pytest.raises(ClusterManagerError, match="CLUSTER_MANAGER_RUN_DISK_MB"):
        load_settings({"CLUSTER_MANAGER_RUN_DISK_MB": "0"}, dotenv_path=None)


def test_the_benchmark_case_setting_reaches_every_run():
    assert local_limits(load_settings({}, dotenv_path=None)).benchmark_case_s is None
    settings = load_settings({"CLUSTER_MANAGER_BENCHMARK_CASE_S": "0.25"}, dotenv_path=None)
    base = local_limits(settings)
    assert base.benchmark_case_s == 0.25
    registry = parse_registry(
        {"gpus": {"B200": {"launcher": "github", "workflow": "w.yml", "runner_labels": ["b"]}}}
    )
    assert registry.get("B200").run_limits(base).benchmark_case_s == 0.25
    with pytest.raises(ClusterManagerError, match="CLUSTER_MANAGER_BENCHMARK_CASE_S must be"):
        load_settings({"CLUSTER_MANAGER_BENCHMARK_CASE_S": "soon"}, dotenv_path=None)
