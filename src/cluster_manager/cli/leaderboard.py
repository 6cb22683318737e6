"""`cluster-manager leaderboard check|create|list|show|delete|task|template`."""

from __future__ import annotations

import functools
import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import click

from cluster_manager.app import load_settings_registry
from cluster_manager.cli.common import (
    EXIT_FAILED,
    EXIT_PASSED,
    cli,
    fail,
    root_option,
    with_port,
)
from cluster_manager.cli.gpu_names import canonical_gpu, gpu_names
from cluster_manager.cli.local_eval import run_here
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.progress import ProgressEvent, phase_started
from cluster_manager.core.task import find_template, load_task, no_template
from cluster_manager.core.wording import utc_minute
from cluster_manager.rendering.reports import (
    format_leaderboards,
    format_ranking,
    format_task_checks,
)
from cluster_manager.service import Submitter, parse_deadline
from cluster_manager.service.port import ServicePort
from cluster_manager.service.task_check import check_targets, check_task
from cluster_manager.settings import Settings, local_limits


@cli.group("leaderboard")
def leaderboard_group() -> None:
    """Check tasks; create, list, show and delete leaderboards; read their tasks."""


@leaderboard_group.command("check")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--gpu",
    default="CPU",
    show_default=True,
    help="The GPU type this machine is (one of the local launcher's): its devices and limits "
    "apply.",
)
@root_option
@click.option("--sandbox", is_flag=True, help="Run in the sandbox the bot uses.")
@click.option("--json", "as_json", is_flag=True, help="Print only the results, as JSON.")
@click.pass_obj
def check_command(
    settings: Settings, path: Path, gpu: str, root: Path | None, sandbox: bool, as_json: bool
) -> None:
    """Check the tasks at PATH before publishing them: a task folder, a .zip, or a competition
    YAML (each of its problems). Each task is loaded and its reference runs as the submission
    in benchmark mode (tests, then benchmarks), here. Exits 0 only when every task loads and
    every task that can run here passes; a task that needs a GPU this machine lacks says
    which."""
    try:
        registry = load_settings_registry(settings)
        gpu = canonical_gpu(gpu, registry.names)
        machine = registry.get(gpu)
        if machine.launcher != "local":
            raise ClusterManagerError(
                f"{gpu} runs on the {machine.launcher} launcher; a check runs on this machine: "
                "pass a GPU type of the local launcher"
            )
        targets = check_targets(path)
    except ClusterManagerError as exc:
        fail(str(exc))
    limits = machine.run_limits(local_limits(settings))
    checks = []
    for i, target in enumerate(targets, 1):
        shown = None if as_json else _CheckProgress(target.name, i, len(targets))
        run = functools.partial(run_here, sandbox=sandbox, on_progress=shown)
        checks.append(check_task(target, gpu=machine, limits=limits, run=run, root=root))
        if shown is not None:
            shown.done(checks[-1].ok)
    if as_json:
        click.echo(json.dumps([{**asdict(c), "ok": c.ok} for c in checks], indent=2))
    else:
        click.echo(format_task_checks(checks))
    sys.exit(EXIT_PASSED if all(c.ok for c in checks) else EXIT_FAILED)


class _CheckProgress:
    """What `check` is doing, on stderr: each task as it starts, its phases, how it ended."""

    def __init__(self, name: str, index: int, count: int) -> None:
        self.name = name
        self.began = time.monotonic()
        click.echo(f"… [{index}/{count}] {name}", err=True)

    def __call__(self, event: ProgressEvent) -> None:
        if event.get("event") == "compile":
            click.echo(f"…   {self.name}: compiling", err=True)
        elif phase := phase_started(event):
            click.echo(f"…   {self.name}: {phase}", err=True)

    def done(self, ok: bool) -> None:
        took = time.monotonic() - self.began
        click.echo(f"{'✅' if ok else '❌'} {self.name} ({took:.1f} s)", err=True)


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
@root_option
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
    """Create leaderboard NAME from a task (through a server: with the admin token, the task
    read here and sent)."""
    gpus = tuple(gpu_names(settings, gpus))
    try:
        task = load_task(task_path, root=root)
        when = parse_deadline(deadline)
    except ClusterManagerError as exc:
        fail(str(exc))

    async def body(port: ServicePort) -> None:
        board = await port.leaderboards.create(
            name,
            task,
            when,
            list(gpus),
            creator=Submitter(creator, creator),
            rate_limit_per_hour=rate_limit,
        )
        click.echo(
            f"created {board.name} on {', '.join(board.gpus)} until {utc_minute(board.deadline)}"
        )

    with_port(settings, body, role="admin")


@leaderboard_group.command("list")
@click.pass_obj
def list_command(settings: Settings) -> None:
    """All leaderboards with their GPUs, deadline and time left."""

    async def body(port: ServicePort) -> None:
        boards = await port.leaderboards.all(include_closed=True)
        click.echo(format_leaderboards(boards, datetime.now(UTC)))

    with_port(settings, body)


@leaderboard_group.command("show")
@click.argument("name")
@click.option("--gpu", default=None, help="Only this GPU type.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option(
    "--after-deadline",
    is_flag=True,
    help="The ranking of the runs made after the deadline, not the competition's.",
)
@click.pass_obj
def show_command(
    settings: Settings, name: str, gpu: str | None, limit: int, after_deadline: bool
) -> None:
    """The ranking of NAME per GPU: best score per user."""
    if gpu is not None:
        gpu = gpu_names(settings, [gpu])[0]

    async def body(port: ServicePort) -> None:
        rankings = await port.leaderboards.ranking(
            name, gpu, limit=limit, after_deadline=after_deadline
        )
        click.echo(format_ranking(name, rankings, after_deadline=after_deadline))

    with_port(settings, body)


@leaderboard_group.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm: deletes every submission too.")
@click.pass_obj
def delete_command(settings: Settings, name: str, yes: bool) -> None:
    """Delete NAME with all its submissions and results (through a server: with the admin
    token)."""

    async def body(port: ServicePort) -> None:
        await port.leaderboards.get(name)  # an unknown name is refused before --yes is asked
        if not yes:
            raise ClusterManagerError(
                f"deleting {name!r} removes all its submissions; pass --yes to confirm"
            )
        await port.leaderboards.delete(name)
        click.echo(f"deleted {name}")

    with_port(settings, body, role="admin")


@leaderboard_group.command("task")
@click.argument("name")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the task's files into this folder (default: list them).",
)
@click.pass_obj
def task_command(settings: Settings, name: str, out: Path | None) -> None:
    """The files of NAME's task that competitors may read: its description, reference and
    harness, and the templates."""

    async def body(port: ServicePort) -> tuple[str, dict[str, str]]:
        files = await port.leaderboards.task_files(name)
        return (await port.leaderboards.get(name)).task.description, files

    description, files = with_port(settings, body)
    if out is None:
        click.echo(description.rstrip())
        click.echo("")
        for file_name, content in sorted(files.items()):
            click.echo(f"  {file_name}  ({len(content.encode())} bytes)")
        click.echo("\nwrite them out with --out DIR", err=True)
        return
    try:
        written = write_files(files, out)
    except (ClusterManagerError, OSError) as exc:
        fail(str(exc))
    click.echo(f"wrote {len(written)} files to {out}")


def write_files(files: dict[str, str], out: Path) -> list[Path]:
    """Writes the task's files under `out`, refusing names that would leave it (a server's
    answer is not trusted to name only files inside)."""
    written = []
    root = out.resolve()
    for name, content in sorted(files.items()):
        target = (root / name).resolve()
        if not target.is_relative_to(root):
            raise ClusterManagerError(f"a task file's name leaves {out}: {name!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        written.append(target)
    return written


@leaderboard_group.command("template")
@click.argument("name")
@click.argument("language", required=False)
@click.pass_obj
def template_command(settings: Settings, name: str, language: str | None) -> None:
    """Print NAME's starter file for LANGUAGE: python, cuda (as the task names them, in any
    case) or the task's lang (py, cu); without it, the task's only template, else Python's."""

    async def body(port: ServicePort) -> str:
        templates = await port.leaderboards.templates(name)
        asked = language or (next(iter(templates)) if len(templates) == 1 else "python")
        found = find_template(templates, asked)
        if found is None:
            raise ClusterManagerError(no_template(name, asked, templates))
        return found

    click.echo(with_port(settings, body), nl=False)
