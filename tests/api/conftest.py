"""The real ASGI app over a real Postgres and the local launcher, reached through httpx:
in process (ASGITransport) for requests and answers, through a uvicorn on 127.0.0.1 where a
stream must be read as it arrives (or dropped half-way). Runs are replayed from recordings
(tests/support/replay.py) unless a test is marked `real_runs`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from cluster_manager.api.app import create_api
from cluster_manager.app import App
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Limits
from cluster_manager.core.task import load_task
from cluster_manager.launchers.base import Launcher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling
from cluster_manager.service import Service, Submitter
from cluster_manager.settings import Settings
from tests.conftest import BENCHMARK_CASE_S, EXAMPLES
from tests.support import replay

# Runs on the "local" GPU types are replayed unless a test is marked `real_runs`.
local_launcher = replay.local_launcher
replay_launcher = replay.replay_launcher

ADMIN_TOKEN = "admin-token-for-tests"
IDENTITY = EXAMPLES / "identity_py"
FAST = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.05, limits=Limits())
BOARD = "identity"


@pytest.fixture
def api_registry() -> GpuRegistry:
    return GpuRegistry(
        {
            "CPU": GpuType("CPU", "local", max_concurrent=2, devices=2),
            "CPU2": GpuType("CPU2", "local", max_concurrent=1, devices=2),
        }
    )


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=db_url,
        data_dir=tmp_path,
        local_memory_limit_mb=None,
        admin_token=ADMIN_TOKEN,
        api_rate_limit_per_minute=10_000,
        benchmark_case_s=BENCHMARK_CASE_S,
    )


@pytest.fixture
async def app(
    pool: Any,
    db_url: str,
    api_registry: GpuRegistry,
    settings: Settings,
    local_launcher: Launcher,
) -> App:
    service = Service(pool, api_registry)
    await service.leaderboards.create(
        BOARD,
        load_task(IDENTITY),
        datetime(2099, 1, 1, tzinfo=UTC),
        ["CPU", "CPU2"],
        creator=Submitter("org", "org"),
    )
    return App(
        settings=settings,
        database_url=db_url,
        embedded=False,
        pool=pool,
        registry=api_registry,
        launchers={"local": local_launcher},
        service=service,
    )


@pytest.fixture
def api(app: App, settings: Settings) -> Any:
    return create_api(app.service, settings)


@pytest.fixture
async def client(api: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


@pytest.fixture
async def scheduler(app: App) -> AsyncIterator[None]:
    """Runs submitted jobs, as `serve` does in its own process."""
    stop = asyncio.Event()
    task = asyncio.create_task(keep_scheduling(app.scheduler, stop, FAST))
    yield
    await stop_scheduling(task, stop)


@pytest.fixture
async def live_url(api: Any) -> AsyncIterator[str]:
    """The app behind a real uvicorn on a free loopback port."""
    server = uvicorn.Server(
        uvicorn.Config(api, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)


async def token_of(app: App, name: str) -> str:
    return await app.service.accounts.issue_token(Submitter(name, name))


def popcorn_headers(token: str) -> dict[str, str]:
    return {"X-Popcorn-Cli-Id": token}


def source(name: str = "submission.py") -> bytes:
    return (IDENTITY / name).read_bytes()
