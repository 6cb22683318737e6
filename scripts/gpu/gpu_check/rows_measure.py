"""What the runner measures on a GPU: telemetry of a ranked run, the ranked score against an
independent timing of the same kernel and against its other ranked runs, and Nsight Compute's
report in profile mode."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from cluster_manager.core.profiling import NCU
from cluster_manager.core.run_results import RunResult
from gpu_check import judges
from gpu_check.commands import EXAMPLES, MATMUL_TASK, quick_env, run_eval, write_out
from gpu_check.outcome import Outcome, failed
from gpu_check.rows_runner import RowContext

INDEPENDENT = Path(__file__).resolve().with_name("independent.py")
RANKED = "ranked-matmul"  # the shared RunResult: telemetry's run, reused by the timing row
PROFILED = "vectoradd_py"
REPORT = "profile.ncu-rep"


def ranked_matmul(ctx: RowContext) -> tuple[RunResult | None, str]:
    """A ranked run of the timing task (run once, for both rows that read it)."""
    shared = ctx.setting.shared
    if RANKED not in shared:
        task = MATMUL_TASK
        result, proc = run_eval(ctx, task, task / "submission.py", "leaderboard")
        shared[RANKED] = (result, "" if result is not None else proc.said())
    found: tuple[RunResult | None, str] = shared[RANKED]
    return found


def telemetry(ctx: RowContext) -> Outcome:
    result, said = ranked_matmul(ctx)
    if result is None:
        return failed("the ranked run printed no RunResult", said)
    judged = judges.telemetry(result)
    if not result.passed:
        return failed(judged.figures, f"the run did not pass: {result.message}\n{judged.details}")
    return judged


def timing(ctx: RowContext) -> Outcome:
    """The ranked score of the matrix product against do_bench's mean of the same call."""
    result, said = ranked_matmul(ctx)
    if result is None or not result.passed or result.score is None:
        why = said if result is None else f"{result.verdict.value}: {result.message}"
        return failed("the ranked run did not give a score", why)
    case = _benchmark_case(MATMUL_TASK)
    proc = ctx.run(
        [
            sys.executable,
            str(INDEPENDENT),
            str(MATMUL_TASK),
            str(MATMUL_TASK / "submission.py"),
            str(case["size"]),
            str(case["seed"]),
        ]
    )
    try:
        measured = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return failed("do_bench gave no figure", proc.said())
    judged = judges.timing(result.score, measured["mean_ms"] / 1e3, "do_bench")
    bench = result.benchmarks[0] if result.benchmarks else None
    details = (
        f"harness: score {result.score * 1e3:.4f} ms over "
        f"{bench.runs if bench else '?'} ranked calls (fresh inputs each); "
        f"do_bench: mean {measured['mean_ms']:.4f} ms, median {measured['median_ms']:.4f} ms "
        f"over {measured['calls']} calls on {measured['device']}\n{judged.details}"
    )
    return replace(judged, details=details.strip())


SPREAD_RUNS = 5


def ranked_spread(ctx: RowContext) -> Outcome:
    """Five ranked runs of the timing task's submission, one after another, and a benchmark
    run of it: how far apart the scores of one file land, and how far from what the benchmark
    showed (`make bench`'s `ranked_score_spread` and `ranked_vs_benchmark_ratio_max`, on a
    GPU)."""
    submission = MATMUL_TASK / "submission.py"
    scores = []
    for i in range(SPREAD_RUNS):
        result, proc = run_eval(ctx, MATMUL_TASK, submission, "leaderboard")
        if result is None or result.score is None:
            why = proc.said() if result is None else f"{result.verdict.value}: {result.message}"
            return failed(f"ranked run {i + 1} of {SPREAD_RUNS} gave no score", why)
        scores.append(result.score)
    result, proc = run_eval(ctx, MATMUL_TASK, submission, "benchmark")
    if result is None or not result.passed or not result.benchmarks:
        why = proc.said() if result is None else f"{result.verdict.value}: {result.message}"
        return failed("the benchmark run gave no mean", why)
    return judges.spread(scores, result.benchmarks[0].mean / 1e9)


def _benchmark_case(task: Path) -> dict[str, int]:
    from cluster_manager.core.task import load_task

    case = load_task(task).benchmarks[0]
    size, seed = case["size"], case["seed"]
    if not (isinstance(size, int) and isinstance(seed, int)):
        raise ValueError(f"{task.name}'s benchmark has no whole size and seed: {case}")
    return {"size": size, "seed": seed}


def profile(ctx: RowContext) -> Outcome:
    """Profile mode with the machine's ncu; if its default clock control fails here, once more
    with `--clock-control none` (a wrapper named by CLUSTER_MANAGER_NCU) and say so."""
    task = ctx.setting.examples / PROFILED
    submission = task / EXAMPLES[PROFILED]
    result, proc = run_eval(ctx, task, submission, "profile", env=quick_env(ctx))
    if result is None:
        return failed(f"no RunResult (exit {proc.returncode})", proc.said())
    judged, report = judges.profile(result)
    if judged.status != "pass" and _ncu_ran(result):
        wrapper = _ncu_without_clock_control(ctx)
        again, proc = run_eval(
            ctx, task, submission, "profile", env=quick_env(ctx, CLUSTER_MANAGER_NCU=wrapper)
        )
        if again is not None:
            second, report = judges.profile(again)
            note = f"ncu's default failed ({judged.figures}); with --clock-control none: "
            judged = replace(second, figures=note + second.figures)
    if not report:
        return judged
    where = write_out(ctx, REPORT, report)
    return replace(judged, details=f"{judged.details}\nreport: {where}".strip())


def _ncu_ran(result: RunResult) -> bool:
    return any(p.profiler is not None and p.profiler.tool == NCU for p in result.phases)


def _ncu_without_clock_control(ctx: RowContext) -> str:
    wrapper = ctx.setting.work / "ncu-no-clock-control"
    wrapper.write_text('#!/bin/sh\nexec ncu --clock-control none "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)
