"""The profiler of a profile phase: ncu around the task's main where the machine has it, else
the harness's torch profiler (or the task's own main's profiling), said in the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cluster_manager.core.models import Language, Mode, RunMode, RunRequest
from cluster_manager.core.profiling import NCU, TASK, TORCH, ProfilerOutcome
from cluster_manager.harness import environment, ncu
from cluster_manager.sandbox import process
from cluster_manager.sandbox.plan import TMP_DIR, Sandbox

IMPORT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Capture:
    """How a profile phase runs: its command (ncu's, when found) and what it adds to the
    phase's environment."""

    command: list[str]
    ncu: str | None = None
    report: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    builtin: bool = True  # the built-in harness (which has the torch profiler to fall back on)


def plan(
    request: RunRequest, mode: RunMode, command: Sequence[str], env: dict[str, str], workdir: Path
) -> Capture | None:
    """The phase's capture; None for every phase but a profile."""
    if mode is not Mode.PROFILE:
        return None
    builtin = request.task.lang is Language.PYTHON and request.task.main is None
    found = ncu.find_ncu(env)
    if found is None:
        return Capture(list(command), builtin=builtin)
    report = workdir / TMP_DIR / ncu.REPORT_NAME
    argv = ncu.ncu_command(found, request.profile, str(report), command, nvtx=builtin)
    return Capture(argv, found, report, {ncu.PROFILER_ENV: NCU}, builtin)


def collect(
    capture: Capture,
    request: RunRequest,
    workdir: Path,
    env: dict[str, str],
    sandbox: Sandbox,
    output: str,
) -> ProfilerOutcome:
    """What the phase's profiler left. The report is turned into text inside the sandbox: it
    is the submission's file as much as ncu's."""
    if capture.ncu is None or capture.report is None:
        return ProfilerOutcome(tool=TORCH if capture.builtin else TASK, note=ncu.NOT_FOUND)
    report = ncu.read_report(capture.report)
    details = ""
    if report is not None:
        result = process.run_tree(
            sandbox.wrap(ncu.details_command(capture.ncu, str(capture.report)), keep_files=True),
            cwd=workdir,
            env=env,
            timeout=IMPORT_TIMEOUT_S,
            output_cap=ncu.MAX_DETAILS_CHARS,
            limits=environment.limits(request, IMPORT_TIMEOUT_S, sandbox),
            isolation=sandbox.isolation,
        )
        details = result.stdout if result.exit_code == 0 else ""
    return ncu.outcome(capture.command, report, details, output)


def tool_dirs(environ: dict[str, str]) -> list[str]:
    """Where ncu is installed, for the sandbox's read-only view (nothing if it is absent)."""
    found = ncu.find_ncu(environ)
    if found is None:
        return []
    home = Path(found).resolve().parent.parent  # bin/ncu or nsight-compute-X/ncu
    return [str(home)] if home != Path("/") else []
