"""`cluster-manager eval`: one submission against one task on this machine, no database."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cluster_manager.cli.common import (
    EXIT_FAILED,
    EXIT_PASSED,
    cli,
    fail,
    mode_option,
    root_option,
)
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode, RunRequest, Task
from cluster_manager.core.progress import ProgressEvent, phase_started
from cluster_manager.core.protocol import new_secret_seed, parse_seed
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.speed_of_light import Peaks
from cluster_manager.core.submission import read_source_file, validate_submission
from cluster_manager.core.task import load_task
from cluster_manager.rendering.reports import format_report
from cluster_manager.settings import Settings, local_limits


def build_request(
    task: Task,
    submission_path: Path,
    mode: Mode,
    seed: int | None,
    settings: Settings,
    peaks: Peaks | None = None,
) -> RunRequest:
    data = read_source_file(submission_path)
    submission = validate_submission(submission_path.name, data, task.lang)
    if mode is Mode.LEADERBOARD and seed is None:
        seed = new_secret_seed()
    limits = local_limits(settings)
    return RunRequest.of_submission(task, submission.code, mode, limits, seed, peaks=peaks)


def published_peaks(settings: Settings, gpu: str | None) -> Peaks | None:
    """`--gpu`'s published peaks (the registry's), the speed of light a run here is measured
    against; None without it (a machine without a GPU then measures its own)."""
    if gpu is None:
        return None
    from cluster_manager.app import load_settings_registry  # not for a plain `eval`
    from cluster_manager.cli.gpu_names import canonical_gpu

    registry = load_settings_registry(settings)
    return registry.get(canonical_gpu(gpu, registry.names)).peaks


def run_here(
    request: RunRequest,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    *,
    sandbox: bool = False,
) -> RunResult:
    """Runs the request through the runner in this process. The task still runs in a process
    tree of its own, killed whole at the end, as on every launcher; only a second interpreter
    start-up (the runner's, a fifth of a second) is saved for a user waiting at the terminal.

    Without `sandbox` the task runs as the caller, with their network and files: it is their
    own code, and what it writes (debug dumps, say) stays where they can see it.
    """
    from cluster_manager.harness import runner
    from cluster_manager.sandbox import lifecycle

    lifecycle.become_subreaper()  # what the task's processes leave behind is ours to kill
    lifecycle.kill_everything_on_sigterm()
    return runner.run(request, progress=on_progress, isolate=sandbox)


def _print_progress(event: ProgressEvent) -> None:
    if event.get("event") == "compile":
        click.echo("… compiling", err=True)
    elif phase := phase_started(event):
        click.echo(f"… {phase}", err=True)


class SeedType(click.ParamType[int, Any]):
    name = "seed"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_seed(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


SEED = SeedType()


@cli.command("eval")
@click.argument("task_path", metavar="TASK", type=click.Path(path_type=Path))
@click.argument("submission", type=click.Path(path_type=Path))
@mode_option(
    Mode.TEST,
    "test: correctness; benchmark: timings; leaderboard: ranked run with a secret seed; "
    "profile: a profiler's report.",
)
@click.option(
    "--seed",
    type=SEED,
    help="Secret seed for leaderboard mode (random when omitted).",
)
@click.option(
    "--sandbox",
    is_flag=True,
    help="Run in the sandbox the bot uses (as root: own user, no network, private /tmp).",
)
@click.option(
    "--gpu",
    help="GPU type (gpus.yml) whose published peaks each case's speed of light is measured "
    "against, as on the bot; without it a machine without a GPU measures its own.",
)
@click.option("--json", "as_json", is_flag=True, help="Print only the RunResult JSON.")
@root_option
@click.pass_obj
def eval_command(
    settings: Settings,
    task_path: Path,
    submission: Path,
    mode: str,
    seed: int | None,
    sandbox: bool,
    gpu: str | None,
    as_json: bool,
    root: Path | None,
) -> None:
    """Run SUBMISSION against the task at TASK (a folder or .zip) on this machine."""
    try:
        task = load_task(task_path, root=root)
        peaks = published_peaks(settings, gpu)
        request = build_request(task, submission, Mode(mode), seed, settings, peaks)
    except ClusterManagerError as exc:
        fail(str(exc))
    result = run_here(request, None if as_json else _print_progress, sandbox=sandbox)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        title = f"{task.name} / {submission.name}"
        click.echo(
            format_report(result, title=title, file_name=submission.name, slot=task.submission_name)
        )
    sys.exit(EXIT_PASSED if result.passed else EXIT_FAILED)
