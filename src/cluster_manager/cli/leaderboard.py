"""`cluster-manager leaderboard create|list|show|delete`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from cluster_manager.app import App
from cluster_manager.cli.common import cli, fail, with_app
from cluster_manager.core.task import load_task
from cluster_manager.errors import ClusterManagerError
from cluster_manager.report import format_leaderboards, format_ranking
from cluster_manager.service import Submitter, parse_deadline
from cluster_manager.settings import Settings


@cli.group("leaderboard")
def leaderboard_group() -> None:
    """Create, list, show and delete leaderboards."""


@leaderboard_group.command("create")
@click.argument("name")
@click.option(
    "--task",
    "task_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Task folder or .zip.",
)
@click.option("--deadline", required=True, help="ISO 8601; without a time zone it is UTC.")
@click.option("--gpu", "gpus", required=True, multiple=True, help="GPU type (repeatable).")
@click.option(
    "--rate-limit",
    type=click.IntRange(min=1),
    default=None,
    help="Submissions per user per hour (default from the settings).",
)
@click.option("--creator", default="cli", show_default=True, help="Who creates it.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A task folder's sources may come from anywhere under this folder (default: the "
    "nearest folder above the task holding .git or a competition YAML, else its grandparent).",
)
@click.pass_obj
def create_command(
    settings: Settings,
    name: str,
    task_path: Path,
    deadline: str,
    gpus: tuple[str, ...],
    rate_limit: int | None,
    creator: str,
    root: Path | None,
) -> None:
    """Create leaderboard NAME from a task."""
    try:
        task = load_task(task_path, root=root)
        when = parse_deadline(deadline)
    except ClusterManagerError as exc:
        fail(str(exc))

    async def body(app: App) -> None:
        board = await app.service.create_leaderboard(
            name,
            task,
            when,
            list(gpus),
            creator=Submitter(creator, creator),
            rate_limit_per_hour=rate_limit,
        )
        click.echo(
            f"created {board.name} on {', '.join(board.gpus)} until "
            f"{board.deadline.astimezone(UTC).isoformat()}"
        )

    with_app(settings, body)


@leaderboard_group.command("list")
@click.pass_obj
def list_command(settings: Settings) -> None:
    """All leaderboards with their GPUs, deadline and time left."""

    async def body(app: App) -> None:
        click.echo(format_leaderboards(await app.service.list_leaderboards(), datetime.now(UTC)))

    with_app(settings, body)


@leaderboard_group.command("show")
@click.argument("name")
@click.option("--gpu", default=None, help="Only this GPU type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.pass_obj
def show_command(settings: Settings, name: str, gpu: str | None, limit: int) -> None:
    """The ranking of NAME per GPU: best score per user."""

    async def body(app: App) -> None:
        click.echo(format_ranking(name, await app.service.ranking(name, gpu, limit=limit)))

    with_app(settings, body)


@leaderboard_group.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm: deletes every submission too.")
@click.pass_obj
def delete_command(settings: Settings, name: str, yes: bool) -> None:
    """Delete NAME with all its submissions and results."""
    if not yes:
        fail(f"deleting {name!r} removes all its submissions; pass --yes to confirm")

    async def body(app: App) -> None:
        await app.service.delete_leaderboard(name)
        click.echo(f"deleted {name}")

    with_app(settings, body)
