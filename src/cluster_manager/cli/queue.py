"""`cluster-manager queue [--user NAME]`: jobs waiting and running per GPU type, and the
user's own open jobs with their places in line (through the server with its token when
CLUSTER_MANAGER_API_URL is set)."""

from __future__ import annotations

import getpass
from typing import Any

import click

from cluster_manager.app import App
from cluster_manager.cli.api_client import ApiClient
from cluster_manager.cli.common import DEFAULT_USER_HELP, cli, fail, on_database_or_server
from cluster_manager.rendering.ops import format_queue
from cluster_manager.service import Submitter
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
    name = user or getpass.getuser()

    async def local(app: App) -> dict[str, Any]:
        return (await app.service.queues(Submitter(name, name))).to_json()

    def over_api(client: ApiClient) -> dict[str, Any]:
        found: dict[str, Any] = client.get("/queue")
        return found

    click.echo(
        format_queue(on_database_or_server(settings, local, over_api, token=settings.api_token))
    )
