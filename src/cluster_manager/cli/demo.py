"""`cluster-manager demo`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cluster_manager.app import App
from cluster_manager.cli.common import (
    EXIT_FAILED,
    EXIT_PASSED,
    cli,
    fail,
    refuse_over_api,
    with_app,
)
from cluster_manager.data import EXAMPLES_DIR
from cluster_manager.settings import Settings


@cli.command("demo")
@click.option(
    "--examples",
    type=click.Path(file_okay=False, path_type=Path),
    default=EXAMPLES_DIR,
    help="Folder of example tasks (default: the ones shipped in the package).",
)
@click.pass_obj
def demo_command(settings: Settings, examples: Path) -> None:
    """Create example leaderboards, submit right and wrong kernels, print the rankings (on
    the database; with CLUSTER_MANAGER_API_URL set it needs DATABASE_URL too)."""
    from cluster_manager.cli.demo_run import DemoOutcome, run_demo

    refuse_over_api(settings, "`demo` fills a database with examples")
    if not examples.is_dir():
        fail(f"no examples folder at {examples}")

    async def body(app: App) -> DemoOutcome:
        return await run_demo(app, examples, click.echo)

    outcome = with_app(settings, body)
    if not outcome.order_ok:
        click.echo("A solution does not rank ahead of its template.")
    click.echo(
        "Every verdict was as expected."
        if outcome.verdicts_ok
        else "Some verdicts were unexpected."
    )
    sys.exit(EXIT_PASSED if outcome.verdicts_ok and outcome.order_ok else EXIT_FAILED)
