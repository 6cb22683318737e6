"""`cluster-manager join CODE [--user NAME]`: join an invite-only leaderboard (through the
server with the user's token when CLUSTER_MANAGER_API_URL is set)."""

from __future__ import annotations

import getpass

import click

from cluster_manager.cli.common import DEFAULT_USER_HELP, cli, fail, with_port
from cluster_manager.service import Submitter
from cluster_manager.service.port import ServicePort
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
    name = user or getpass.getuser()  # through a server the token says who joins

    async def body(port: ServicePort) -> None:
        board, joined = await port.invites.join(code, Submitter(name, name))
        click.echo(f"joined {board}" if joined else f"already a member of {board}")

    with_port(settings, body)
