"""The Modal app: one function per GPU type, each running one request through the runner.

Deploy it (again after every change to the runner or the core):

    modal deploy src/cluster_manager/runners/modal_app.py

The Modal launcher (`launchers/modal.py`) finds the functions by name in the deployed app and
spawns them with an encoded request (`core.payload`); each returns the RunResult as JSON.
Only a process with the `modal` package installed imports this module.
"""

from __future__ import annotations

from typing import Any

import modal

from cluster_manager.core.gpus import MODAL_TIMEOUT_S
from cluster_manager.core.payload import decode_payload
from cluster_manager.harness import runner

APP_NAME = "discord-cluster-manager"
# Modal GPU type -> the name of the function that runs on it.
FUNCTIONS = {
    "T4": "run_t4",
    "L4": "run_l4",
    "A100": "run_a100",
    "H100": "run_h100",
    "B200": "run_b200",
}
# nvcc of the base image and the CUDA of the torch wheel share one major version, so CUDA
# sources and torch extensions build against what torch runs with. CUDA 13 still covers T4
# (sm_75) and already covers B200 (sm_100).
CUDA_IMAGE = "nvidia/cuda:13.0.0-devel-ubuntu22.04"
# The pins of requirements/runner-cuda.lock (tests/test_dependency_lock.py holds them equal),
# torch from PyTorch's own index.
TORCH = "torch==2.13.0"
TORCH_INDEX = "https://download.pytorch.org/whl/cu130"
NUMPY = "numpy==2.4.6"
NVML = "nvidia-ml-py==13.615.71"  # GPU telemetry
# A backstop only: the scheduler cancels a run once its own, tighter deadline has passed.
TIMEOUT_S = MODAL_TIMEOUT_S

app = modal.App(APP_NAME)

image = (
    modal.Image.from_registry(CUDA_IMAGE, add_python="3.11")
    # The sandbox (docs/SECURITY.md); where Modal's runtime refuses its namespaces, runs say
    # `sandbox: partial` and their scores are held back unless the operator allows them.
    .apt_install("bubblewrap")
    .pip_install(TORCH, index_url=TORCH_INDEX)
    .pip_install(NUMPY, NVML)
    # The harness runs as `python -m cluster_manager...` in a child process: it needs the path.
    .env({"PYTHONPATH": "/root"})
    # Mounted at start-up rather than baked in, so it must stay the last step.
    .add_local_python_source("cluster_manager")
)

# Submissions are untrusted code: no network, and a fresh container for every run so that
# nothing one submission leaves behind (files, processes, patched packages) meets the next.
OPTIONS: dict[str, Any] = {
    "image": image,
    "timeout": TIMEOUT_S,
    "block_network": True,
    "single_use_containers": True,
}


def run_payload(payload: str) -> dict[str, Any]:
    """Decodes a request, runs it to the end and returns its RunResult as JSON, in a process
    guarded as the runner entrypoint guards its own."""
    runner.guard_this_process()
    request = decode_payload(payload)
    return runner.run(request, isolate=True).to_json()


@app.function(gpu="T4", **OPTIONS)
def run_t4(payload: str) -> dict[str, Any]:
    return run_payload(payload)


@app.function(gpu="L4", **OPTIONS)
def run_l4(payload: str) -> dict[str, Any]:
    return run_payload(payload)


@app.function(gpu="A100", **OPTIONS)
def run_a100(payload: str) -> dict[str, Any]:
    return run_payload(payload)


@app.function(gpu="H100", **OPTIONS)
def run_h100(payload: str) -> dict[str, Any]:
    return run_payload(payload)


@app.function(gpu="B200", **OPTIONS)
def run_b200(payload: str) -> dict[str, Any]:
    return run_payload(payload)
