"""The project's commands as a user types them, run for a row, and what they printed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster_manager.core.run_results import RunResult
from gpu_check import judges
from gpu_check.rows_runner import Proc, RowContext

CLI = "cluster-manager"
MATMUL_TASK = Path(__file__).resolve().with_name("matmul_task")
# Each example's submission; allreduce_py needs as many GPUs as its world_size (2).
EXAMPLES = {
    "vectoradd_cu": "submission.cu",
    "identity_py": "submission.py",
    "vectoradd_py": "submission.py",
    "softmax_py": "submission.py",
}
MULTI_GPU_EXAMPLES = {"allreduce_py": ("submission.py", 2)}
# Benchmark cases timed this long where the figures are not the point (the suite's own value).
QUICK_CASE_S = "0.5"


def eval_command(task: Path, submission: Path, mode: str, *flags: str) -> list[str]:
    return [CLI, "eval", str(task), str(submission), "--mode", mode, *flags, "--json"]


def run_eval(
    ctx: RowContext,
    task: Path,
    submission: Path,
    mode: str,
    *flags: str,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    cwd: Path | None = None,
) -> tuple[RunResult | None, Proc]:
    """`cluster-manager eval ... --json`, and the RunResult it printed (None: none)."""
    proc = ctx.run([*prefix, *eval_command(task, submission, mode, *flags)], env=env, cwd=cwd)
    try:
        return judges.run_result(proc.stdout), proc
    except ValueError:
        return None, proc


def quick_env(ctx: RowContext, **extra: str) -> dict[str, str]:
    return {**ctx.setting.env, "CLUSTER_MANAGER_BENCHMARK_CASE_S": QUICK_CASE_S, **extra}


def write_out(ctx: RowContext, name: str, data: bytes) -> str:
    """Writes a file that comes back with the run ($OUT); says where, or that it stays."""
    out = ctx.setting.out
    if out is None:
        target = ctx.setting.work / name
    else:
        out.mkdir(parents=True, exist_ok=True)
        target = out / name
    target.write_bytes(data)
    return str(target)
