"""`cluster-manager worker`: a long-running scheduler (several may share one database)."""

from __future__ import annotations

import asyncio
import logging
import signal

import click

from cluster_manager.app import App
from cluster_manager.cli.common import cli, refuse_over_api, with_app
from cluster_manager.cli.logs import configure_logging
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.settings import Settings, local_limits

log = logging.getLogger(__name__)


@cli.command("worker")
@click.option(
    "--lease",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds a job's lease lasts without a heartbeat.",
)
@click.option(
    "--poll",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between queue scans (new jobs also wake it at once).",
)
@click.pass_obj
def worker_command(settings: Settings, lease: float, poll: float) -> None:
    """Claim, dispatch and follow jobs until interrupted; resumes jobs left by dead workers.

    On the database (DATABASE_URL, or the embedded one): with CLUSTER_MANAGER_API_URL set it
    needs DATABASE_URL too, else it is refused."""
    refuse_over_api(settings, "`worker` runs the queue of a database")
    configure_logging(settings)

    async def body(app: App) -> None:
        config = SchedulerConfig(
            lease_s=lease,
            heartbeat_s=lease / 3,
            poll_s=poll,
            limits=local_limits(settings),
            allow_unsandboxed_ranking=settings.allow_unsandboxed_ranking,
            throttle_threshold=settings.throttle_threshold,
        )
        scheduler = app.scheduler(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        log.info("worker %s serving %s", scheduler.owner, ", ".join(scheduler.gpus))
        await scheduler.run(stop)

    with_app(settings, body)
