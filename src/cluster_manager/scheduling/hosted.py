"""A scheduler hosted by a front end's process (the bot, the API server): restarted after a
crash, and given a grace period to stop. A new scheduler adopts the jobs whose leases
expired, including those a previous run of the process left in flight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from cluster_manager.core.waits import within
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler

log = logging.getLogger(__name__)

RESTART_S = 5.0
STOP_S = 10.0


async def keep_scheduling(
    make_scheduler: Callable[[SchedulerConfig | None], Scheduler],
    stop: asyncio.Event,
    config: SchedulerConfig | None = None,
) -> None:
    while not stop.is_set():
        scheduler = make_scheduler(config)
        log.info("scheduler %s serving %s", scheduler.owner, ", ".join(scheduler.gpus))
        try:
            await scheduler.run(stop)
        except Exception:
            log.exception("the scheduler stopped; restarting in %.0f s", RESTART_S)
            await within(RESTART_S, stop.wait())


async def stop_scheduling(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    stop.set()
    if not await within(STOP_S, task):  # cancels the task when time runs out
        log.warning("the scheduler did not stop in time; its leases will expire")
