"""`cluster-manager serve`: the HTTP API, with its own scheduler, over the app's database."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

import click
import uvicorn

from cluster_manager.app import App
from cluster_manager.cli.common import cli, with_app
from cluster_manager.cli.logs import configure_logging
from cluster_manager.settings import Settings


class _Server(uvicorn.Server):
    """Stops on SIGINT/SIGTERM as uvicorn's does, but returns instead of raising the signal
    again, so that the scheduler and the database are closed before the process ends."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--no-scheduler",
    is_flag=True,
    help="Do not run jobs here: leave them to `cluster-manager worker` processes.",
)
@click.pass_obj
def serve_command(settings: Settings, host: str, port: int, no_scheduler: bool) -> None:
    """Serve the HTTP API (popcorn-cli compatible) until interrupted. It is the server: it
    opens its database (DATABASE_URL, or the embedded one) whatever CLUSTER_MANAGER_API_URL
    says, which names it to clients."""
    from cluster_manager.api.app import create_api
    from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling

    configure_logging(settings)

    async def body(app: App) -> None:
        api = create_api(app.service, settings)
        # The app (database, launchers) is opened here, around the server: no lifespan. No
        # log config either: uvicorn's loggers go through ours (cli.logs), at our level.
        config = uvicorn.Config(
            api, host=host, port=port, lifespan="off", log_config=None, log_level=None
        )
        server = _Server(config)
        stop = asyncio.Event()
        scheduling = (
            None if no_scheduler else asyncio.create_task(keep_scheduling(app.scheduler, stop))
        )
        try:
            await server.serve()  # returns on SIGINT/SIGTERM, after open requests end
        finally:
            if scheduling is not None:
                await stop_scheduling(scheduling, stop)

    with_app(settings, body)
