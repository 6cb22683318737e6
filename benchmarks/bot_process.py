"""The bot process measured by `bot_rss.py`: the real ClusterBot with its own scheduler.

    python benchmarks/bot_process.py DATABASE_URL DISCORD_API_BASE

It logs in to the fake Discord API, prints `ready`, then reads commands on stdin, one per
line: a JSON list of INTERACTION_CREATE payloads (delivered as the gateway would, answered
`dispatched`), or `stop`. Its GPU type `HOLD` runs on a launcher whose runs never finish, so
every submission stays in flight, followed live by the bot.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import discord
import discordlib

from cluster_manager.app import App
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.run_results import RunResult
from cluster_manager.discord.bot import BotConfig, ClusterBot
from cluster_manager.launchers.base import Launcher, ProgressCallback, RunHandle, RunState
from cluster_manager.service import Service
from cluster_manager.settings import Settings
from cluster_manager.storage.database import create_pool

HOLD = GpuType("HOLD", "hold", max_concurrent=1000)
REGISTRY = GpuRegistry({HOLD.name: HOLD})


class HoldLauncher(Launcher):
    """Accepts every run and never finishes one."""

    name = "hold"

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        return RunHandle(self.name, key)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        return {h.external_id: RunState.RUNNING for h in handles}

    async def result(self, handle: RunHandle) -> RunResult:
        raise RuntimeError("held runs have no result")

    async def cancel(self, handle: RunHandle) -> None:
        pass

    async def follow(
        self, handle: RunHandle, *, timeout: float, on_progress: ProgressCallback | None = None
    ) -> RunResult | None:
        await asyncio.Event().wait()  # held until the bot stops
        return None


def say(line: str) -> None:
    print(line, flush=True)


async def commands(bot: ClusterBot) -> None:
    while True:
        line = (await asyncio.to_thread(sys.stdin.readline)).strip()
        if not line or line == "stop":
            return
        payloads: list[dict[str, Any]] = json.loads(line)
        for payload in payloads:
            bot._connection.parse_interaction_create(payload)
        say("dispatched")


async def main(url: str, api_base: str) -> None:
    discord.http.Route.BASE = api_base  # every REST call, webhooks included, goes there
    pool = await create_pool(url)
    with tempfile.TemporaryDirectory(prefix="cm-bench-bot-") as tmp:
        app = App(
            settings=Settings(database_url=url, data_dir=Path(tmp)),
            database_url=url,
            embedded=False,
            pool=pool,
            registry=REGISTRY,
            launchers={"hold": HoldLauncher()},
            service=Service(pool, REGISTRY),
        )
        bot = ClusterBot(app, BotConfig(guild_id=discordlib.GUILD_ID))
        try:
            await bot.login("fake-bot-token")
            bot._connection._add_guild_from_data(discordlib.GUILD)  # as GUILD_CREATE does
            say("ready")
            await commands(bot)
        finally:
            await stop(bot, pool)


async def stop(bot: ClusterBot, pool: asyncpg.Pool) -> None:
    """Submissions never finish here: cancel their followers rather than wait for them."""
    await bot.close()  # stops the scheduler, which cancels the held runs
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    pool.terminate()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
