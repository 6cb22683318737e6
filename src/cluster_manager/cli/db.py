"""`cluster-manager db migrate|backup|restore`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from cluster_manager.app import backup_database, migrate_database, restore_database
from cluster_manager.cli.common import cli, fail, refuse_over_api
from cluster_manager.cli.errors import error_line, without_password
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.settings import Settings

pg_bin_option = click.option(
    "--pg-bin",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The folder of the pg_dump and pg_restore to use (default: the embedded Postgres's, "
    "else the newest installed that suits the server's version, its own first).",
)


@cli.group("db")
def db_group() -> None:
    """Database schema, backups and restores."""


@db_group.command("migrate")
@click.pass_obj
def migrate_command(settings: Settings) -> None:
    """Apply pending migrations to DATABASE_URL (or the embedded database). With
    CLUSTER_MANAGER_API_URL set it needs DATABASE_URL too, else it is refused."""
    refuse_over_api(settings, "`db migrate` migrates a database")
    try:
        applied = asyncio.run(migrate_database(settings))
    except ClusterManagerError as exc:
        fail(error_line(settings, exc))
    click.echo("applied: " + ", ".join(applied) if applied else "the schema is up to date")


@db_group.command("backup")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@pg_bin_option
@click.pass_obj
def backup_command(settings: Settings, file: Path, pg_bin: Path | None) -> None:
    """Write the whole database (DATABASE_URL, or the embedded one) to FILE, a new file, in
    pg_dump's custom format: leaderboards, submissions, runs, rankings, users, teams, API
    tokens, the queue and the installation id. One consistent snapshot: the bot, servers and
    workers may keep running."""
    refuse_over_api(settings, "`db backup` backs up a database")
    try:
        backup = asyncio.run(backup_database(settings, file, pg_bin=pg_bin))
    except ClusterManagerError as exc:
        fail(without_password(error_line(settings, exc)))
    click.echo(
        f"backed up {_which_database(settings)} to {backup.path}: {backup.tables} tables, "
        f"schema at {backup.migrations[-1]}, PostgreSQL {backup.server_version}"
    )


@db_group.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--replace",
    is_flag=True,
    help="Replace the tables the database holds (asks first; the old ones are dropped once "
    "the restore succeeded). Without it a restore goes only into an empty database.",
)
@click.option("--yes", is_flag=True, help="With --replace: do not ask.")
@pg_bin_option
@click.pass_obj
def restore_command(
    settings: Settings, file: Path, replace: bool, yes: bool, pg_bin: Path | None
) -> None:
    """Restore FILE, written by `db backup`, into DATABASE_URL (or the embedded database),
    which must be empty (a new database), then apply the migrations the backup's schema
    lacks. A backup of a schema newer than this release is refused before anything changes.
    Stop the bot, servers and workers of the database first."""
    refuse_over_api(settings, "`db restore` restores into a database")

    def confirm(question: str) -> bool:
        if yes:
            return True
        try:
            return click.confirm(question, default=False, err=True)
        except click.Abort:  # nobody to answer (no input, or ^C)
            click.echo(err=True)
            return False

    try:
        restored = asyncio.run(
            restore_database(settings, file, replace=replace, confirm=confirm, pg_bin=pg_bin)
        )
    except ClusterManagerError as exc:
        fail(without_password(error_line(settings, exc)))
    backup = restored.backup
    replaced = restored.replaced_tables
    instead = f", replacing its {replaced} tables" if replaced else ""
    click.echo(
        f"restored {backup.path} ({backup.tables} tables, schema at {backup.migrations[-1]}) "
        f"into {_which_database(settings)}{instead}"
    )
    migrated = restored.migrated
    click.echo("applied: " + ", ".join(migrated) if migrated else "the schema is up to date")


def _which_database(settings: Settings) -> str:
    if settings.database_url:
        return f"the database at {without_password(settings.database_url)}"
    return f"the embedded database in {settings.data_dir / 'postgres'}"
