"""`cluster-manager user token NAME [--revoke]`: API tokens for users of the terminal (on the
database only: through a server it is refused, since the API issues no user's token)."""

from __future__ import annotations

import click

from cluster_manager.cli.common import cli, with_port
from cluster_manager.service import Submitter
from cluster_manager.service.port import ServicePort
from cluster_manager.settings import Settings


@cli.group("user")
def user_group() -> None:
    """Users' API tokens."""


@user_group.command("token")
@click.argument("name")
@click.option("--revoke", is_flag=True, help="Revoke NAME's token instead of issuing one.")
@click.pass_obj
def token_command(settings: Settings, name: str, revoke: bool) -> None:
    """Issue an API token for user NAME (their previous one stops working), printed once.

    NAME is the user as the CLI knows them (`submit --user NAME`); a Discord user gets their
    token with /token instead, so that their API submissions rank as theirs. On the database
    only: with CLUSTER_MANAGER_API_URL set it is refused."""

    async def body(port: ServicePort) -> None:
        if revoke:
            revoked = await port.accounts.revoke_token(name)
            click.echo(f"revoked the token of {name}" if revoked else f"{name} had no token")
            return
        token = await port.accounts.issue_token(Submitter(name, name))
        click.echo(token)
        click.echo(
            f"API token of {name}: shown once, stored only as a hash. For popcorn-cli, put "
            "`cli_id: <token>` in ~/.popcorn.yaml; for our CLI, set CLUSTER_MANAGER_TOKEN.",
            err=True,
        )

    with_port(settings, body, role="admin")
