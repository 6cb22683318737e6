"""`cluster-manager submit`: store a submission, run it with live progress, report, place."""

from __future__ import annotations

import asyncio
import getpass
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from cluster_manager.cli.common import (
    DEFAULT_USER_HELP,
    EXIT_FAILED,
    EXIT_PASSED,
    MODE_ALIASES,
    RunJobs,
    cli,
    fail,
    mode_option,
    with_port_and_jobs,
)
from cluster_manager.cli.gpu_names import gpu_names
from cluster_manager.cli.profiling import chosen_filter, ncu_options
from cluster_manager.core.errors import InvalidSubmissionError
from cluster_manager.core.models import DEFAULT_SUBMIT_MODE, Mode
from cluster_manager.core.submission import read_source_file
from cluster_manager.rendering.reports import (
    format_event,
    format_placement,
    format_submission_report,
)
from cluster_manager.service import SubmissionReceipt, Submitter
from cluster_manager.service.port import ServicePort
from cluster_manager.settings import Settings


@cli.command("submit")
@click.argument("leaderboard")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--gpu", "gpus", multiple=True, help="GPU type (repeatable; default: the only one).")
@mode_option(
    DEFAULT_SUBMIT_MODE,
    "test: correctness; benchmark: timings; leaderboard: ranked, with a secret re-run "
    "(counted against the ranked quota); profile: a profiler's report. Without --mode, at a "
    "terminal you are asked which; in a script or CI a file is only tested: a ranked run is "
    "made only when asked for.",
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
    gpus = tuple(gpu_names(settings, gpus))
    try:
        data = read_source_file(file)
    except InvalidSubmissionError as exc:
        fail(str(exc))
    mode = chosen_mode(click.get_current_context(), mode)
    profile = chosen_filter(Mode(mode), ncu)
    if settings.api_url is not None and user is not None:
        fail("--user is for the database: through the API you submit as your token's user")
    name = user or getpass.getuser()  # through a server the token says who submits

    async def body(port: ServicePort, run_jobs: RunJobs) -> bool:
        receipt = await port.submissions.submit(
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
            f"({receipt.mode.value} mode) as {receipt.user}{_after_deadline(receipt)}",
            err=True,
        )
        if no_wait:
            return True
        await _run_and_follow(port, run_jobs, receipt)
        report = await port.submissions.report(receipt.submission_id)
        click.echo(format_submission_report(report))
        if receipt.mode is Mode.LEADERBOARD:
            click.echo("")
            for placement in await port.submissions.placements(receipt.submission_id):
                click.echo(format_placement(placement))
        return report.passed

    passed = with_port_and_jobs(settings, body)
    sys.exit(EXIT_PASSED if passed else EXIT_FAILED)


MODE_QUESTION = (
    "Which run? test: correctness only; benchmark: timings; leaderboard: ranked (a secret "
    "re-run, counted against the ranked quota); profile: a profiler's report"
)


def chosen_mode(ctx: click.Context, given: str) -> str:
    """The mode asked for. Without --mode, a person at a terminal is asked which (as
    popcorn-cli does), `test` the answer an Enter gives; a script or CI, where nobody could
    answer, gets `test`: a ranked run spends the quota, so it is never made unasked."""
    if ctx.get_parameter_source("mode") is not ParameterSource.DEFAULT or not at_a_terminal():
        return given
    click.echo(MODE_QUESTION, err=True)
    answer: str = click.prompt(
        "Mode",
        type=click.Choice([*(m.value for m in Mode), *MODE_ALIASES]),
        default=DEFAULT_SUBMIT_MODE.value,
        err=True,
    )
    return MODE_ALIASES.get(answer, answer)


def at_a_terminal() -> bool:
    """Whether a person is there to answer: both stdin and stdout are a terminal."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _after_deadline(receipt: SubmissionReceipt) -> str:
    """Said at once: its rank, if any, is not in the competition's ranking."""
    return ", after the deadline (ranked among runs after it)" if receipt.after_deadline else ""


async def _run_and_follow(port: ServicePort, run_jobs: RunJobs, receipt: SubmissionReceipt) -> None:
    """Prints the submission's progress until all its jobs have ended, while `run_jobs` runs
    them (on a database this command serves them itself; through a server its workers do)."""
    watching = asyncio.Event()

    async def follow() -> None:
        try:
            async for event in port.events.watch(receipt.submission_id):
                click.echo(format_event(event), err=True)
                watching.set()
        finally:
            watching.set()

    async def serve() -> None:
        # Once the watch has read the jobs as queued: else a fast claim hides that state.
        await watching.wait()
        await run_jobs(receipt)

    await asyncio.gather(serve(), follow())
