"""`cluster-manager queue [--user NAME]`: jobs waiting and running per GPU type, and the
user's own open jobs with their places in line (through the server with its token when
CLUSTER_MANAGER_API_URL is set)."""

from __future__ import annotations

import getpass

import click

from cluster_manager.cli.common import DEFAULT_USER_HELP, cli, fail, with_port
from cluster_manager.rendering.ops import format_queue
from cluster_manager.service import Submitter
from cluster_manager.service.port import ServicePort
from cluster_manager.settings import Settings


@cli.command("queue")
@click.option(
    "--user",
    default=None,
    help=f"Whose jobs to show ({DEFAULT_USER_HELP}).",
)
@click.pass_obj
def queue_command(settings: Settings, user: str | None) -> None:
    """What waits and runs on each GPU type, and where your jobs are in line."""
    if settings.api_url is not None and user is not None:
        fail("--user is for the database: through the API you see your token's jobs")
    name = user or getpass.getuser()  # through a server the token says whose jobs

    async def body(port: ServicePort) -> None:
        click.echo(format_queue((await port.queues.view(Submitter(name, name))).to_json()))

    with_port(settings, body)
