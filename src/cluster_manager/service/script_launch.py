"""Script runs (`/run`): a script run as-is on a GPU, unranked and time-limited.

Unlike submissions these are not queued and their results are not stored: the caller waits for
the result. They go through the same launchers and runner as everything else, and through the
service (`Service.scripts.run`) for a slot of the GPU type's concurrency and a per-user limit.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any

from cluster_manager.core.errors import InvalidSubmissionError, LauncherError
from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.models import Limits, RunRequest, ScriptMode
from cluster_manager.core.phases import run_timeout, script_task
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.submission import MAX_SUBMISSION_BYTES, decode_source
from cluster_manager.launchers.base import Launcher

MAX_SCRIPT_SECONDS = 120.0


def script_request(file_name: str, data: bytes, *, timeout_s: float, limits: Limits) -> RunRequest:
    name = PurePosixPath(file_name.replace("\\", "/")).name
    if PurePosixPath(name).suffix != ".py":
        raise InvalidSubmissionError(f"{name}: /run takes a Python file (.py)")
    if not data.strip():
        raise InvalidSubmissionError(f"{name}: the file is empty")
    if len(data) > MAX_SUBMISSION_BYTES:
        raise InvalidSubmissionError(
            f"{name}: {len(data)} bytes is over the limit of {MAX_SUBMISSION_BYTES} bytes"
        )
    code = decode_source(name, data)
    if not 0 < timeout_s <= MAX_SCRIPT_SECONDS:
        raise InvalidSubmissionError(f"the time limit must be in (0, {MAX_SCRIPT_SECONDS:g}] s")
    return RunRequest(
        task=script_task(name, timeout_s),
        submission_name=name,
        submission_code=code,
        mode=ScriptMode.SCRIPT,
        limits=limits,
    )


def launcher_for(registry: GpuRegistry, launchers: Mapping[str, Launcher], gpu: str) -> Launcher:
    gpu_type = registry.get(gpu)
    launcher = launchers.get(gpu_type.launcher)
    if launcher is None:
        raise LauncherError(f"this bot has no {gpu_type.launcher} launcher for {gpu}")
    return launcher


async def run_script(
    registry: GpuRegistry,
    launchers: Mapping[str, Launcher],
    gpu: str,
    request: RunRequest,
    *,
    key: str | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> RunResult:
    """Runs it and waits for the result. Front ends go through `Service.scripts.run`, which
    holds a slot of the GPU type's concurrency and applies the per-user limit. Torch
    extensions the script builds aim at the type's arch."""
    launcher = launcher_for(registry, launchers, gpu)
    key = key or f"script-{uuid.uuid4().hex}"
    gpu_type = registry.get(gpu)
    request = dataclasses.replace(request, arch=gpu_type.arch)
    handle = await launcher.submit(request, key, gpu=gpu_type)
    result = await launcher.follow(handle, timeout=run_timeout(request), on_progress=on_progress)
    if result is None:
        raise LauncherError(f"the run on {gpu} was lost before it reported a result")
    return result
