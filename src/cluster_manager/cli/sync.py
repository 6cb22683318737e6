"""`cluster-manager leaderboard sync FILE [--problem-set NAME] [--dry-run] [--force]`: a
problem set's leaderboards created or brought up to date from its competition file."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cluster_manager.app import load_settings_registry
from cluster_manager.cli.common import with_port
from cluster_manager.cli.leaderboard import leaderboard_group
from cluster_manager.core.sync_plan import SyncPlan
from cluster_manager.rendering.ops import format_sync_plan
from cluster_manager.service.port import ServicePort
from cluster_manager.service.problem_sets import competition_file, load_problem_set
from cluster_manager.settings import Settings

EXIT_HELD = 1  # changes held back for --force


@leaderboard_group.command("sync")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--problem-set", metavar="NAME", help="PATH is a folder: sync its NAME.yaml (e.g. pmpp_v2)."
)
@click.option("--dry-run", is_flag=True, help="Only print what would change.")
@click.option(
    "--force",
    is_flag=True,
    help="Also apply changes that make stored scores incomparable (task files, cases, "
    "GPU types removed).",
)
@click.pass_obj
def sync_command(
    settings: Settings, path: Path, problem_set: str | None, dry_run: bool, force: bool
) -> None:
    """Create every leaderboard of a problem set that does not exist, and update the others.

    One transaction: a malformed file, a task that does not load or a bad deadline changes
    nothing. A second sync without changes does nothing. On the database only: through a
    server, upload the problem set to POST /admin/update-problems instead."""

    async def body(port: ServicePort) -> SyncPlan:
        unserved = await port.leaderboards.gpus_not_served()
        registry = load_settings_registry(settings)  # the one `open_app` gives the service
        loaded = load_problem_set(competition_file(path, problem_set), registry, unserved)
        return await port.problem_sets.sync(
            loaded.problems, skipped=loaded.skipped, apply=not dry_run, force=force
        )

    plan = with_port(settings, body, role="admin")
    click.echo(format_sync_plan(plan, applied=not dry_run, force=force))
    if not dry_run and plan.held(force):
        sys.exit(EXIT_HELD)
