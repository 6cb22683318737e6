"""`cluster-manager team ...`: a team on a leaderboard, whose members rank as one entry.
On a database the user is `--user` (or whoever runs the command); through the server
(CLUSTER_MANAGER_API_URL) the token's user, and `--user` is refused."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cluster_manager.cli.common import DEFAULT_USER_HELP, cli, fail, with_port
from cluster_manager.rendering.reports import format_team, format_teams
from cluster_manager.service import Submitter
from cluster_manager.service.port import ServicePort
from cluster_manager.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


@cli.group("team")
def team_group() -> None:
    """Teams: create one on a leaderboard, invite, join, leave, list."""


def user_option(command: F) -> F:
    return click.option("--user", default=None, help=f"Act as this user ({DEFAULT_USER_HELP}).")(
        command
    )


def _who(settings: Settings, user: str | None) -> Submitter:
    """The user a command acts as; through a server the token says who, whatever this is."""
    if settings.api_url is not None and user is not None:
        fail("--user is for the database: through the API you act as your token's user")
    name = user or getpass.getuser()
    return Submitter(name, name)


@team_group.command("create")
@click.argument("leaderboard")
@click.argument("name")
@user_option
@click.pass_obj
def create_command(settings: Settings, leaderboard: str, name: str, user: str | None) -> None:
    """Create team NAME on LEADERBOARD, with you as its first member."""
    who = _who(settings, user)

    async def body(port: ServicePort) -> None:
        team = await port.teams.create(leaderboard, name, who)
        click.echo(f"created team {team.name} on {team.leaderboard}")

    with_port(settings, body)


@team_group.command("invite")
@click.argument("leaderboard")
@user_option
@click.pass_obj
def invite_command(settings: Settings, leaderboard: str, user: str | None) -> None:
    """Print a code that lets one more user join your team on LEADERBOARD (good once, while
    you stay in the team)."""
    who = _who(settings, user)

    async def body(port: ServicePort) -> None:
        click.echo(await port.teams.invite(leaderboard, who))

    with_port(settings, body)


@team_group.command("join")
@click.argument("code")
@user_option
@click.pass_obj
def join_command(settings: Settings, code: str, user: str | None) -> None:
    """Join the team whose invite CODE you were given."""
    who = _who(settings, user)

    async def body(port: ServicePort) -> None:
        team = await port.teams.join(code, who)
        click.echo(f"joined team {team.name} on {team.leaderboard}")

    with_port(settings, body)


@team_group.command("leave")
@click.argument("leaderboard")
@user_option
@click.pass_obj
def leave_command(settings: Settings, leaderboard: str, user: str | None) -> None:
    """Leave your team on LEADERBOARD; your ranked submissions rank as your own again."""
    who = _who(settings, user)

    async def body(port: ServicePort) -> None:
        left = await port.teams.leave(leaderboard, who)
        click.echo(f"left team {left} on {leaderboard}")

    with_port(settings, body)


@team_group.command("show")
@click.argument("leaderboard")
@user_option
@click.pass_obj
def show_command(settings: Settings, leaderboard: str, user: str | None) -> None:
    """Your team on LEADERBOARD and its members."""
    who = _who(settings, user)

    async def body(port: ServicePort) -> None:
        team = await port.teams.of_user(leaderboard, who)
        click.echo(f"you are in no team on {leaderboard}" if team is None else format_team(team))

    with_port(settings, body)


@team_group.command("list")
@click.argument("leaderboard")
@click.pass_obj
def list_command(settings: Settings, leaderboard: str) -> None:
    """Every team on LEADERBOARD and its members."""

    async def body(port: ServicePort) -> None:
        # On a database, whoever runs the command holds it all; through a server the token
        # decides what an invite-only leaderboard shows.
        teams = await port.teams.all(leaderboard, include_closed=True)
        click.echo(format_teams(leaderboard, teams))

    with_port(settings, body)
