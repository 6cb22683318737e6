"""The runner entrypoint, the same on every launcher.

    python -m cluster_manager.harness.runner --request - --output result.json < request.json

(`--request -`, stdin, is what launchers use: the secret seed is never on disk.)

It takes a run request, materialises the task and the submission in a fresh private directory,
compiles CUDA sources, runs the task's main once per phase speaking the popcorn protocol, and
emits one versioned RunResult JSON. It imports nothing beyond `cluster_manager.core` and the
standard library, so a GPU machine needs only this package, Python and torch.

The entrypoint sandboxes every phase as far as the machine allows (`RunResult.system` says how
far): as root, the task's main runs as a user id of this run's own, with no network but
loopback, private /tmp, /var/tmp and /dev/shm, /proc showing only its own processes, and the
run directory readable but not writable (only HOME and TMPDIR are); without root, in a network
namespace of its own if unprivileged user namespaces work. CUDA tasks run their `eval.cu` in
the submission's process: that harness must unset POPCORN_SEED and POPCORN_FD before calling
the submission (ours does), yet the pipe stays open in that process, so nothing stops such a
submission from writing its own results; only the sandbox (user, namespaces) keeps it away from
other runs and the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.models import Language, Mode, RunMode, RunRequest, ScriptMode, Verdict
from cluster_manager.core.payload import open_payload, seal_result
from cluster_manager.core.phases import Phase, plan_phases
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from cluster_manager.core.sealed import take_payload_key
from cluster_manager.core.verdicts import PhaseJudgement, judge_phase
from cluster_manager.harness import capture, devices, environment, machine_peaks, overrun, results
from cluster_manager.harness.cuda_build import CUDA_BINARY, compile_cuda
from cluster_manager.harness.sysinfo import system_info
from cluster_manager.sandbox import lifecycle, process
from cluster_manager.sandbox.plan import (
    HOME_DIR,
    TMP_DIR,
    Sandbox,
    fresh_private_dirs,
    plan_sandbox,
    share,
    unsandboxed,
)
from cluster_manager.telemetry.choice import chosen_factory
from cluster_manager.telemetry.probes import ProbeFactory, visible_device
from cluster_manager.telemetry.recorder import RunTelemetry

BUILTIN_HARNESS = ("-m", "cluster_manager.harness.evaluate")
# The built-in harness failing to start, before it reported anything (no submission code has
# run in it by then): what the runner's Python cannot import is the runner's to fix.
_PLATFORM_IMPORT = re.compile(r"ModuleNotFoundError: No module named '(cluster_manager|torch)'")

Progress = Callable[[dict[str, Any]], None]


def _safe_path(root: Path, name: str) -> Path:
    pure = PurePosixPath(name)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"unsafe file name in run request: {name!r}")
    return root.joinpath(*pure.parts)


def materialise(request: RunRequest, workdir: Path) -> None:
    for file in request.task.files:
        target = _safe_path(workdir, file.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        content = request.submission_code if file.is_submission else file.content
        target.write_text(content or "", encoding="utf-8")


def _main_command(request: RunRequest, mode: RunMode, tests_file: str) -> list[str]:
    task = request.task
    if task.lang is Language.CUDA:
        return [f"./{CUDA_BINARY}", mode, tests_file]
    if mode is ScriptMode.SCRIPT:
        return [sys.executable, request.submission_name]
    if task.main is None:
        return [sys.executable, *BUILTIN_HARNESS, mode, tests_file]
    return [sys.executable, task.main, mode, tests_file]


def run_phase(
    request: RunRequest,
    phase: Phase,
    workdir: Path,
    env: dict[str, str],
    sandbox: Sandbox | None = None,
) -> PhaseOutcome:
    sandbox = sandbox or unsandboxed()
    tests_file = _write_cases(phase, workdir, sandbox)
    fresh_private_dirs(workdir, sandbox)
    timeout = request.task.timeout_for(phase.mode)
    command = _main_command(request, phase.mode, tests_file)
    profiling = capture.plan(request, phase.mode, command, env, workdir)
    result = process.run_tree(
        # Nsight Compute's report comes back from TMPDIR: that phase writes to the host's disk.
        sandbox.wrap(
            profiling.command if profiling else command,
            keep_files=profiling is not None and profiling.report is not None,
        ),
        cwd=workdir,
        env=environment.phase_env(request, phase, env, timeout, profiling.env if profiling else {}),
        timeout=timeout + request.limits.grace,
        output_cap=request.limits.output_bytes,
        limits=environment.limits(request, timeout + request.limits.grace, sandbox),
        side_channels=[protocol.ENV_FD],
        isolation=sandbox.isolation,
    )
    judgement, verdict, message = _judge(request, phase, result, timeout, sandbox)
    profiler = None
    if profiling is not None:
        output = result.stdout + result.stderr
        profiler = capture.collect(profiling, request, workdir, env, sandbox, output)
    return PhaseOutcome(
        name=phase.mode,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=round(result.duration_s, 3),
        stdout=result.stdout,
        stderr=result.stderr,
        verdict=verdict,
        message=message,
        tests=judgement.tests,
        benchmarks=judgement.benchmarks,
        profiler=profiler,
    )


def _write_cases(phase: Phase, workdir: Path, sandbox: Sandbox) -> str:
    """The phase's cases as the task's main reads them; the name of their file."""
    tests_file = f".cases-{phase.mode}.txt"
    (workdir / tests_file).write_text(protocol.format_tests_file(phase.cases), encoding="utf-8")
    if sandbox.user is not None:
        share(workdir / tests_file)
    return tests_file


def _judge(
    request: RunRequest,
    phase: Phase,
    result: process.ProcessResult,
    timeout: float,
    sandbox: Sandbox,
) -> tuple[PhaseJudgement, Verdict, str]:
    """The phase's judgement from what the tree reported, and its verdict and message with
    the last line of stderr and the limit it hit, if any, named."""
    reported = protocol.parse_result_lines(result.side_outputs[protocol.ENV_FD])
    judgement = judge_phase(
        phase.mode,
        case_count=len(phase.cases),
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        timeout_s=timeout,
        result=reported,
        specs=[protocol.format_case(case) for case in phase.cases],
    )
    message = judgement.message
    if judgement.verdict is Verdict.RUNTIME_ERROR and result.stderr.strip():
        message += f" ({result.stderr.strip().splitlines()[-1][:300]})"
    verdict, message = overrun.explain(
        phase.mode,
        result,
        request.limits,
        judgement.verdict,
        message,
        refuses_uncounted=sandbox.refuses_uncounted,
    )
    if (
        not reported
        and request.task.main is None
        and (missing := _PLATFORM_IMPORT.search(result.stderr))
    ):
        verdict = Verdict.INTERNAL_ERROR
        message = (
            f"{phase.mode}: the harness cannot import {missing[1]} where it runs (the "
            "sandbox's user may not read where it is installed): the runner's fault, not the "
            "submission's"
        )
    return judgement, verdict, message


@contextlib.contextmanager
def _run_directory() -> Iterator[Path]:
    """A fresh private directory, removed at the end, also when a SIGTERM cancels the run."""
    with tempfile.TemporaryDirectory(prefix="cm-run-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o700)
        forget = lifecycle.on_termination(lambda: shutil.rmtree(workdir, ignore_errors=True))
        try:
            yield workdir
        finally:
            forget()


def run(
    request: RunRequest,
    *,
    progress: Progress | None = None,
    isolate: bool = False,
    gpu_probe: ProbeFactory | None = None,
) -> RunResult:
    """Runs the request to the end. Never raises: our own failures become `internal_error`.

    `isolate` sandboxes the task's main as far as this machine allows (the entrypoint always
    asks for it); without it the main runs as this process's user, with its network.
    `gpu_probe` samples the GPU during timed phases (default: CLUSTER_MANAGER_GPU_PROBE's).
    """
    notify = progress or (lambda event: None)
    began = time.monotonic()
    durations: dict[str, float] = {}
    try:
        system = system_info()
        short = devices.check(request.gpu_count, system)
        if short is not None:
            return results.refused(request, short, system, results.total(durations, began))
        with _run_directory() as workdir:
            sandbox, env = _prepare(request, workdir, system, isolate=isolate)
            durations["materialise"] = round(time.monotonic() - began, 3)
            compilation = None
            if request.task.lang is Language.CUDA:
                notify({"event": "compile"})
                compilation = compile_cuda(request, workdir, env, sandbox)
                durations["compile"] = compilation.duration_s
                if not compilation.success:
                    return results.compile_failed(
                        request,
                        compilation,
                        system=system,
                        durations=results.total(durations, began),
                    )
                if no_gpu := devices.cuda_without_gpu(request.task.name, system):
                    took = results.total(durations, began)
                    return results.refused(request, no_gpu, system, took, compilation)
            planned = plan_phases(request)
            telemetry = RunTelemetry(gpu_probe or chosen_factory(), visible_device(env))
            phases = _run_phases(
                request, planned, workdir, env, sandbox, notify, durations, telemetry
            )
    except Exception as exc:
        return results.internal_error(request, exc, durations=results.total(durations, began))
    result = results.of_phases(
        request,
        phases,
        len(planned),
        compilation=compilation,
        system=system,
        durations=results.total(durations, began),
    )
    result = dataclasses.replace(result, telemetry=telemetry.phases)
    peaks = machine_peaks.run_peaks(request, result, system)
    return results.with_speed_of_light(result, request, peaks)


def _prepare(
    request: RunRequest, workdir: Path, system: dict[str, Any], *, isolate: bool
) -> tuple[Sandbox, dict[str, str]]:
    """The run directory's files, the sandbox its phases run in (noted in `system`) and
    their environment."""
    materialise(request, workdir)
    for name in (HOME_DIR, TMP_DIR):
        (workdir / name).mkdir(mode=0o700)
    tools = capture.tool_dirs(dict(os.environ)) if request.mode is Mode.PROFILE else []
    pinned = devices.assigned(os.environ).explicit()
    sandbox = (
        plan_sandbox(workdir, tools, pinned, request.limits.disk_bytes, request.limits.memory_bytes)
        if isolate
        else unsandboxed()
    )
    system.update(sandbox.info)
    return sandbox, environment.child_env(workdir, request, sandbox)


def _run_phases(
    request: RunRequest,
    planned: list[Phase],
    workdir: Path,
    env: dict[str, str],
    sandbox: Sandbox,
    notify: Progress,
    durations: dict[str, float],
    telemetry: RunTelemetry,
) -> list[PhaseOutcome]:
    """The planned phases in order, up to the first that does not pass; the timed ones with
    their GPU sampled from this process (never from the task's)."""
    phases: list[PhaseOutcome] = []
    try:
        for phase in planned:
            notify({"event": "phase", "phase": phase.mode, "cases": len(phase.cases)})
            with telemetry.phase(phase.mode):
                outcome = run_phase(request, phase, workdir, env, sandbox)
            durations[phase.mode] = outcome.duration_s
            phases.append(outcome)
            notify({"event": "phase_done", "phase": phase.mode, "verdict": outcome.verdict})
            if outcome.verdict is not Verdict.PASSED:
                break
    finally:
        telemetry.close()
    return phases


def guard_this_process() -> None:
    """What every launcher's runner process does before it holds a request: undumpable (its
    secret seed stays out of /proc), a subreaper (orphans of the task are its to kill), and
    a SIGTERM that kills every tree it runs. The entrypoint and Modal's function both call it.
    Signal handlers belong to the main thread: a caller on another thread (Modal may run a
    function there; its single-use container dies whole on cancellation) goes without."""
    lifecycle.make_undumpable()
    lifecycle.become_subreaper()
    if threading.current_thread() is threading.main_thread():
        lifecycle.kill_everything_on_sigterm()


def _take(path: Path) -> str:
    """Reads the payload file and removes it: the secret seed stays on disk no longer than
    it must, and no later process (the submission's included) can find it there."""
    try:
        return path.read_text("utf-8")
    finally:
        path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one request and write its RunResult JSON.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--request", default="-", help="request JSON file, '-' for stdin")
    source.add_argument(
        "--payload", help="file holding the request as an encoded payload (core.payload)"
    )
    parser.add_argument("--output", default="-", help="result JSON file, '-' for stdout")
    parser.add_argument(
        "--progress", action="store_true", help="write progress events as JSON lines to stderr"
    )
    parser.add_argument(
        "--no-sandbox", action="store_true", help="run the task as this user, with its network"
    )
    args = parser.parse_args(argv)
    guard_this_process()
    result_key = None  # a result is sealed exactly when its request came sealed
    try:
        key = take_payload_key()  # first: no process started from here on inherits it
        if args.payload:
            request, result_key = open_payload(_take(Path(args.payload)), key)
        else:
            raw = sys.stdin.read() if args.request == "-" else Path(args.request).read_text("utf-8")
            request = RunRequest.from_json(json.loads(raw))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"invalid run request: {exc}", file=sys.stderr)
        return 2

    def progress(event: dict[str, Any]) -> None:
        if args.progress:
            print(json.dumps(event, default=str), file=sys.stderr, flush=True)

    outcome = run(request, progress=progress, isolate=not args.no_sandbox)
    result = seal_result(json.dumps(outcome.to_json()), result_key)
    if args.output == "-":
        print(result)
    else:
        Path(args.output).write_text(result, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
