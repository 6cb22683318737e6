"""`cluster-manager db migrate`."""

from __future__ import annotations

import asyncio

import click

from cluster_manager.cli.common import cli, database_error_text, fail
from cluster_manager.errors import ClusterManagerError
from cluster_manager.settings import Settings
from cluster_manager.storage.database import database_url
from cluster_manager.storage.migrations import apply_migrations


@cli.group("db")
def db_group() -> None:
    """Database schema."""


@db_group.command("migrate")
@click.pass_obj
def migrate_command(settings: Settings) -> None:
    """Apply pending migrations to DATABASE_URL (or the embedded database)."""

    async def run() -> list[str]:
        async with database_url(settings.database_url, settings.data_dir) as (url, _):
            return await asyncio.to_thread(apply_migrations, url)

    try:
        applied = asyncio.run(run())
    except ClusterManagerError as exc:
        fail(database_error_text(settings, exc))
    click.echo("applied: " + ", ".join(applied) if applied else "the schema is up to date")
