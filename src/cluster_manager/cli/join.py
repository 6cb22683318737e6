"""`cluster-manager join CODE [--user NAME]`: join an invite-only leaderboard (through the
server with the user's token when CLUSTER_MANAGER_API_URL is set)."""

from __future__ import annotations

import getpass

import click

from cluster_manager.app import App
from cluster_manager.cli.api_client import ApiClient
from cluster_manager.cli.common import DEFAULT_USER_HELP, cli, fail, on_database_or_server
from cluster_manager.service import Submitter
from cluster_manager.settings import Settings


@cli.command("join")
@click.argument("code")
@click.option(
    "--user",
    default=None,
    help=f"Join as this user ({DEFAULT_USER_HELP}).",
)
@click.pass_obj
def join_command(settings: Settings, code: str, user: str | None) -> None:
    """Redeem an invite CODE to submit to its invite-only leaderboard."""
    if settings.api_url is not None and user is not None:
        fail("--user is for the database: through the API you join as your token's user")
    name = user or getpass.getuser()

    async def local(app: App) -> tuple[str, bool]:
        return await app.service.join(code, Submitter(name, name))

    def over_api(client: ApiClient) -> tuple[str, bool]:
        answer = client.call("POST", "/user/join", {"code": code})
        return str(answer["leaderboard"]), answer["status"] == "joined"

    board, joined = on_database_or_server(settings, local, over_api, token=settings.api_token)
    click.echo(f"joined {board}" if joined else f"already a member of {board}")
