"""`cluster-manager db migrate`."""

from __future__ import annotations

import asyncio

import click

from cluster_manager.app import migrate_database
from cluster_manager.cli.common import cli, database_error_text, fail, refuse_over_api
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.settings import Settings


@cli.group("db")
def db_group() -> None:
    """Database schema."""


@db_group.command("migrate")
@click.pass_obj
def migrate_command(settings: Settings) -> None:
    """Apply pending migrations to DATABASE_URL (or the embedded database). With
    CLUSTER_MANAGER_API_URL set it needs DATABASE_URL too, else it is refused."""
    refuse_over_api(settings, "`db migrate` migrates a database")
    try:
        applied = asyncio.run(migrate_database(settings))
    except ClusterManagerError as exc:
        fail(database_error_text(settings, exc))
    click.echo("applied: " + ", ".join(applied) if applied else "the schema is up to date")
