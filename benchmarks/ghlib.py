"""What the GitHub benchmarks share: a registry with one GitHub GPU and a tiny task."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

import yaml

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Limits, Mode, RunRequest, Task, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task

GPU = GpuType(
    "B200",
    "github",
    max_concurrent=200,
    params={"workflow": "nvidia_workflow.yml", "runner_labels": ["self-hosted", "b200"]},
)
REGISTRY = GpuRegistry({GPU.name: GPU})
POLL_INTERVAL_S = 1.0
CODE = "def custom_kernel(data):\n    return data.clone()\n"
REFERENCE = """
import torch

def generate_input(size, seed):
    return torch.randn(size, generator=torch.Generator().manual_seed(seed))

def ref_kernel(data):
    return data.clone()

def check_implementation(data, output):
    return "" if torch.equal(output, data) else "mismatch"
"""


def tiny_task() -> Task:
    with tempfile.TemporaryDirectory(prefix="cm-bench-task-") as tmp:
        directory = Path(tmp)
        (directory / "reference.py").write_text(textwrap.dedent(REFERENCE))
        spec = {
            "files": [
                {"name": "submission.py", "source": "@SUBMISSION@"},
                {"name": "reference.py", "source": "reference.py"},
            ],
            "lang": "py",
            "tests": [{"size": 8, "seed": 1}],
            "benchmarks": [{"size": 256, "seed": 3}],
        }
        (directory / "task.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
        return load_task(directory)


def request(task: Task) -> RunRequest:
    return RunRequest(
        task=task,
        submission_name=task.submission_name,
        submission_code=CODE,
        mode=Mode.TEST,
        secret_seed=None,
        limits=Limits(),
    )


def canned_result() -> RunResult:
    """What the fake's runner hands back at once instead of running anything."""
    return RunResult(True, Verdict.PASSED, Mode.TEST, "ok")
