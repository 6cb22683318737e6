"""`cluster-manager join CODE [--user NAME]`: join an invite-only leaderboard (through the
server with the user's token when CLUSTER_MANAGER_API_URL is set)."""

from __future__ import annotations

import getpass

import click

from cluster_manager.app import App
from cluster_manager.cli.common import cli, fail, with_app
from cluster_manager.client import ApiClient
from cluster_manager.errors import ClusterManagerError
from cluster_manager.service import Submitter
from cluster_manager.settings import Settings


@cli.command("join")
@click.argument("code")
@click.option("--user", default=None, help="Join as this user (default: your login name).")
@click.pass_obj
def join_command(settings: Settings, code: str, user: str | None) -> None:
    """Redeem an invite CODE to submit to its invite-only leaderboard."""
    if settings.api_url is not None:
        if user is not None:
            fail("--user is for the database: through the API you join as your token's user")
        try:
            with ApiClient(settings.api_url, settings.api_token) as client:
                answer = client.call("POST", "/user/join", {"code": code})
        except ClusterManagerError as exc:
            fail(str(exc))
        board, joined = answer["leaderboard"], answer["status"] == "joined"
    else:
        name = user or getpass.getuser()

        async def body(app: App) -> tuple[str, bool]:
            return await app.service.join(code, Submitter(name, name))

        board, joined = with_app(settings, body)
    click.echo(f"joined {board}" if joined else f"already a member of {board}")
