"""`cluster-manager queue [--user NAME]`: jobs waiting and running per GPU type, and the
user's own open jobs with their places in line (through the server with its token when
CLUSTER_MANAGER_API_URL is set)."""

from __future__ import annotations

import getpass
from typing import Any

import click

from cluster_manager.app import App
from cluster_manager.cli.common import cli, fail, with_app
from cluster_manager.client import ApiClient
from cluster_manager.errors import ClusterManagerError
from cluster_manager.ops_report import format_queue
from cluster_manager.service import Submitter
from cluster_manager.settings import Settings


@cli.command("queue")
@click.option("--user", default=None, help="Whose jobs to show (default: your login name).")
@click.pass_obj
def queue_command(settings: Settings, user: str | None) -> None:
    """What waits and runs on each GPU type, and where your jobs are in line."""
    if settings.api_url is not None:
        if user is not None:
            fail("--user is for the database: through the API you see your token's jobs")
        try:
            with ApiClient(settings.api_url, settings.api_token) as client:
                found: dict[str, Any] = client.get("/queue")
        except ClusterManagerError as exc:
            fail(str(exc))
    else:
        name = user or getpass.getuser()

        async def body(app: App) -> dict[str, Any]:
            return (await app.service.queues(Submitter(name, name))).to_json()

        found = with_app(settings, body)
    click.echo(format_queue(found))
