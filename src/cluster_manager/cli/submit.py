"""`cluster-manager submit`: store a submission, run it with live progress, report, place."""

from __future__ import annotations

import asyncio
import getpass
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from cluster_manager.app import App
from cluster_manager.cli import remote
from cluster_manager.cli.api_client import ApiClient
from cluster_manager.cli.common import (
    DEFAULT_USER_HELP,
    EXIT_FAILED,
    EXIT_PASSED,
    cli,
    fail,
    mode_option,
    with_app,
)
from cluster_manager.cli.gpu_names import gpu_names
from cluster_manager.cli.profiling import chosen_filter, ncu_options
from cluster_manager.core.errors import ClusterManagerError, InvalidSubmissionError
from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.core.submission import read_source_file
from cluster_manager.rendering.reports import (
    format_event,
    format_placement,
    format_submission_report,
)
from cluster_manager.service import SubmissionReceipt, Submitter
from cluster_manager.settings import Settings


@cli.command("submit")
@click.argument("leaderboard")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--gpu", "gpus", multiple=True, help="GPU type (repeatable; default: the only one).")
@mode_option(
    Mode.LEADERBOARD,
    "test: correctness; benchmark: timings; leaderboard: ranked, with a secret re-run; "
    "profile: a profiler's report.",
)
@click.option(
    "--user",
    default=None,
    help=f"Submit as this user, the name its ranking shows ({DEFAULT_USER_HELP}).",
)
@click.option("--no-wait", is_flag=True, help="Only enqueue; a worker runs it.")
@ncu_options
@click.pass_obj
def submit_command(
    settings: Settings,
    /,
    leaderboard: str,
    file: Path,
    gpus: tuple[str, ...],
    mode: str,
    user: str | None,
    no_wait: bool,
    **ncu: Any,
) -> None:
    """Submit FILE to LEADERBOARD and follow it live (through the API when
    CLUSTER_MANAGER_API_URL is set, else on the database)."""
    profile = chosen_filter(Mode(mode), ncu)
    gpus = tuple(gpu_names(settings, gpus))
    try:
        data = read_source_file(file)
    except InvalidSubmissionError as exc:
        fail(str(exc))
    if (client := remote.api_client(settings)) is not None:
        if user is not None:
            fail("--user is for the database: through the API you submit as your token's user")
        _submit_remotely(client, leaderboard, file, data, gpus, mode, profile, wait=not no_wait)
    name = user or getpass.getuser()

    async def body(app: App) -> bool:
        receipt = await app.service.submit(
            leaderboard,
            Submitter(name, name),
            file.name,
            data,
            gpus=list(gpus) or None,
            mode=Mode(mode),
            profile=profile,
        )
        click.echo(
            f"submission {receipt.submission_id}: {receipt.file_name} to {receipt.leaderboard} "
            f"({receipt.mode.value} mode) as {receipt.user}",
            err=True,
        )
        if no_wait:
            return True
        await _serve_and_follow(app, receipt)
        report = await app.service.report(receipt.submission_id)
        click.echo(format_submission_report(report))
        if receipt.mode is Mode.LEADERBOARD:
            click.echo("")
            for placement in await app.service.placements(receipt.submission_id):
                click.echo(format_placement(placement))
        return report.passed

    passed = with_app(settings, body)
    sys.exit(EXIT_PASSED if passed else EXIT_FAILED)


async def _serve_and_follow(app: App, receipt: SubmissionReceipt) -> None:
    """Runs the submission's jobs here, printing their progress, until all have ended. Serves
    its own jobs, and adopts orphans of their GPU types (a dead submit's)."""
    scheduler = app.scheduler(
        submission_ids={receipt.submission_id}, gpus={j.gpu for j in receipt.jobs}
    )
    watching = asyncio.Event()

    async def follow() -> None:
        try:
            async for event in app.service.watch(receipt.submission_id):
                click.echo(format_event(event), err=True)
                watching.set()
        finally:
            watching.set()

    async def serve() -> None:
        # Once the watch has read the jobs as queued: else a fast claim hides that state.
        await watching.wait()
        await scheduler.run_until_idle({j.id for j in receipt.jobs})

    await asyncio.gather(serve(), follow())


def _submit_remotely(
    client: ApiClient,
    leaderboard: str,
    file: Path,
    data: bytes,
    gpus: tuple[str, ...],
    mode: str,
    profile: ProfileOptions | None,
    *,
    wait: bool,
) -> NoReturn:
    try:
        with client:
            passed = remote.submit(
                client, leaderboard, file, data, gpus, mode, profile=profile, wait=wait
            )
    except ClusterManagerError as exc:
        fail(str(exc))
    sys.exit(EXIT_PASSED if passed else EXIT_FAILED)
