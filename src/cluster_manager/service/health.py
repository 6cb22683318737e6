"""Operational checks behind /verifydb, /verifyruns and `/health`.

These reach past the rest of the service on purpose: one measures the database itself, the
other drives each launcher directly with a known-good submission, without queueing or storing
anything.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from cluster_manager.core import sandboxing
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import Limits, Mode, RunRequest, Task
from cluster_manager.core.phases import run_timeout
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR
from cluster_manager.launchers.base import Launcher
from cluster_manager.storage.database import DatabaseUnavailableError, round_trip_ms
from cluster_manager.storage.migrations import pending_migrations

VERIFY_EXAMPLE = EXAMPLES_DIR / "identity_py"


@dataclass(frozen=True)
class DatabaseCheck:
    reachable: bool
    round_trip_ms: float | None
    pending: tuple[str, ...]
    error: str = ""


@dataclass(frozen=True)
class LauncherCheck:
    launcher: str
    gpu: str
    passed: bool
    seconds: float
    detail: str


async def check_database(pool: asyncpg.Pool, database_url: str) -> DatabaseCheck:
    try:
        round_trip = await round_trip_ms(pool)
    except DatabaseUnavailableError as exc:
        return DatabaseCheck(False, None, (), f"{type(exc).__name__}: {exc}")
    try:
        pending = await asyncio.to_thread(pending_migrations, database_url)
    except ClusterManagerError as exc:
        return DatabaseCheck(True, round_trip, (), str(exc))
    return DatabaseCheck(True, round_trip, tuple(pending))


async def verify_launchers(
    launchers: Mapping[str, Launcher],
    gpus: Sequence[GpuType],
    limits: Limits,
    example: Path = VERIFY_EXAMPLE,
) -> list[LauncherCheck]:
    """Runs the example's correct submission in test mode on every GPU type served here."""
    task = await asyncio.to_thread(load_task, example)
    code = (example / "submission.py").read_text(encoding="utf-8")
    return list(
        await asyncio.gather(
            *(_verify(launchers[gpu.launcher], task, code, gpu, limits) for gpu in gpus)
        )
    )


async def _verify(
    launcher: Launcher, task: Task, code: str, gpu: GpuType, limits: Limits
) -> LauncherCheck:
    request = RunRequest.of_submission(task, code, Mode.TEST, gpu.run_limits(limits), arch=gpu.arch)
    started = time.perf_counter()
    try:
        handle = await launcher.submit(request, f"verify-{uuid.uuid4().hex}", gpu=gpu)
        result = await launcher.follow(handle, timeout=run_timeout(request))
    except ClusterManagerError as exc:
        return LauncherCheck(gpu.launcher, gpu.name, False, time.perf_counter() - started, str(exc))
    took = time.perf_counter() - started
    if result is None:
        return LauncherCheck(gpu.launcher, gpu.name, False, took, "the run was lost")
    detail = result.verdict.value if result.passed else f"{result.verdict.value}: {result.message}"
    detail += f" ({sandboxing.describe(result.system)})"
    return LauncherCheck(gpu.launcher, gpu.name, result.passed, took, detail)
