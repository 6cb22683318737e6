"""`cluster-manager leaderboard export NAME --format csv|jsonl|parquet [--all] [--out PATH]`:
a leaderboard's results as a data set (on the database; the HTTP API offers no export)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from cluster_manager.cli.common import fail, with_port
from cluster_manager.cli.leaderboard import leaderboard_group
from cluster_manager.rendering.exports import FORMATS, Format, Kind, default_name, write_export
from cluster_manager.service.port import ServicePort
from cluster_manager.settings import Settings


@leaderboard_group.command("export")
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="csv", show_default=True)
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Every submission with its code, runs and scores (default: the rankings).",
)
@click.option(
    "--out",
    # A string: a Path would drop the trailing '/' that says "a folder".
    type=click.Path(),
    default=None,
    help="Where to write: a file, a folder (existing, or ending in '/') to write the default "
    "name into, or '-' for standard output (default: NAME-rankings.FORMAT or "
    "NAME-submissions.FORMAT here).",
)
@click.pass_obj
def export_command(
    settings: Settings, name: str, fmt: Format, everything: bool, out: str | None
) -> None:
    """Write NAME's rankings (or, with --all, every submission) as a data set (on the
    database only: through a server it is refused)."""
    kind: Kind = "submissions" if everything else "rankings"
    target = export_target(out, default_name(name, kind, fmt))
    if str(target) == "-" and fmt == "parquet":
        fail("Parquet is binary: give --out a file name")

    async def body(port: ServicePort) -> int:
        # Both refused before a file is made: through a server (no export), an unknown name.
        pages = port.exports.submissions(name) if everything else port.exports.rankings(name)
        board = await port.leaderboards.get(name)
        if everything and board.is_open(datetime.now(UTC)):
            click.echo(f"note: {name} is still open; this export holds its code", err=True)
        if str(target) == "-":
            return await write_export(pages, kind, fmt, sys.stdout.buffer)
        target.parent.mkdir(parents=True, exist_ok=True)  # a folder named with a trailing '/'
        partial = target.with_name(target.name + ".partial")
        with partial.open("wb") as sink:
            rows = await write_export(pages, kind, fmt, sink)
        partial.replace(target)  # never a half-written file under the real name
        return rows

    rows = with_port(settings, body, role="admin")
    if str(target) != "-":
        click.echo(f"wrote {rows} {kind} rows to {target}")


def export_target(out: str | None, default: Path) -> Path:
    """The file to write: `out` itself, or `default` inside it when `out` names a folder (one
    that exists, or any path ending in '/')."""
    if out is None:
        return default
    if out != "-" and (out.endswith(("/", os.sep)) or Path(out).is_dir()):
        return Path(out) / default.name
    return Path(out)
