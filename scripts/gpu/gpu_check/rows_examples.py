"""The shipped examples on the GPU, and the sandbox around them."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from gpu_check import judges
from gpu_check.commands import CLI, EXAMPLES, MULTI_GPU_EXAMPLES, quick_env, run_eval
from gpu_check.outcome import Outcome, failed, passed
from gpu_check.rows_runner import RowContext

SANDBOX_USER = "cm-gpu-check"  # the ordinary user the sandbox-user row runs as
EVAL_WORKERS = 3


def examples_check(ctx: RowContext) -> Outcome:
    """`leaderboard check` of examples.yaml as this GPU: the Python references pass on it."""
    competition = ctx.setting.examples / "examples.yaml"
    argv = [CLI, "leaderboard", "check", str(competition), "--gpu", ctx.setting.gpu, "--json"]
    proc = ctx.run(argv, env=quick_env(ctx))
    try:
        rows = json.loads(proc.stdout)
    except ValueError:
        return failed(f"no JSON (exit {proc.returncode})", proc.said())
    found = judges.checked(rows)
    figures = f"{len(found.passed)} of {len(rows)} pass: {', '.join(found.passed) or 'none'}"
    if found.needs:
        figures += "; " + "; ".join(f"{name} needs {what}" for name, what, _ in found.needs)
    single_gpu = {"identity", "vectoradd", "softmax"}
    if proc.returncode != 0 or found.failed or not single_gpu <= set(found.passed):
        lines = [f"{name}: {error}" for name, error in found.failed]
        return failed(figures, "\n".join([*lines, proc.said()]))
    return passed(figures, "\n".join(f"{name}: {why}" for name, _, why in found.needs))


def examples_eval(ctx: RowContext) -> Outcome:
    """Each example's own submission through `eval` in test, benchmark and profile modes."""
    return _examples_in(ctx, ("test", "benchmark", "profile"), EVAL_WORKERS)


def examples_ranked(ctx: RowContext) -> Outcome:
    """The same in leaderboard mode, one at a time: a ranked run's calls are each paired with
    the stand-in moving the same data, and scored no lower than the harness's clock."""
    return _examples_in(ctx, ("leaderboard",), 1)


def _examples_in(ctx: RowContext, modes: tuple[str, ...], workers: int) -> Outcome:
    examples = dict(EXAMPLES)
    if int(ctx.setting.facts.get("device_count") or 0) >= 2:
        examples.update({k: v for k, (v, _) in MULTI_GPU_EXAMPLES.items()})
    jobs = [(name, mode) for mode in modes for name in examples]

    # Profile mode of the Python examples takes the torch profiler's path (the profile row
    # takes ncu's); vectoradd_cu's, Nsight Compute's. Fewer ncu runs: each takes tens of seconds.
    no_ncu = quick_env(ctx, CLUSTER_MANAGER_NCU=str(ctx.setting.work / "no-ncu-here"))

    def one(job: tuple[str, str]) -> tuple[str, str, bool, str]:
        name, mode = job
        task = ctx.setting.examples / name
        env = no_ncu if mode == "profile" and name.endswith("_py") else quick_env(ctx)
        result, proc = run_eval(ctx, task, task / examples[name], mode, env=env)
        if result is None:
            return name, mode, False, f"no RunResult (exit {proc.returncode}): {proc.tail(400)}"
        profiler = next((p.profiler for p in result.phases if p.profiler), None)
        said = f"{result.verdict.value}: {result.message}"
        if profiler is not None:
            said += f" ({profiler.summary()})"
        return name, mode, result.passed, said

    outcomes = ctx.map(one, jobs, workers)
    good = sum(ok for _, _, ok, _ in outcomes)
    figures = f"{good} of {len(outcomes)} runs pass ({len(examples)} examples × {len(modes)} modes)"
    lines = [f"{name} {mode}: {said}" for name, mode, _, said in outcomes]
    left = sorted(set(MULTI_GPU_EXAMPLES) - set(examples))
    if left:
        lines.append(f"left out (they need 2 GPUs): {', '.join(left)}")
    details = "\n".join(lines)
    return passed(figures, details) if good == len(outcomes) else failed(figures, details)


def sandbox_root(ctx: RowContext) -> Outcome:
    return _sandboxed(ctx, prefix=[], env=quick_env(ctx, CLUSTER_MANAGER_DEVICES="0"), who="root")


def sandbox_user(ctx: RowContext) -> Outcome:
    """The same runs started by an ordinary user (made here when the check runs as root)."""
    if os.geteuid() != 0:
        who = pwd.getpwuid(os.geteuid()).pw_name
        return _sandboxed(ctx, prefix=[], env=quick_env(ctx, CLUSTER_MANAGER_DEVICES="0"), who=who)
    home = ctx.setting.work / "user-home"
    made = _ordinary_user(home)
    if made:
        return failed("no ordinary user", made)
    env = quick_env(
        ctx,
        CLUSTER_MANAGER_DEVICES="0",
        HOME=str(home),
        TMPDIR=str(home),
        USER=SANDBOX_USER,
        LOGNAME=SANDBOX_USER,
    )
    prefix = ["setpriv", f"--reuid={SANDBOX_USER}", f"--regid={SANDBOX_USER}", "--init-groups"]
    # First what the user must reach at all: a Python whose folders are closed to other users
    # (one under /root, say) fails every run for a reason that is not the sandbox's.
    reach = ctx.run([*prefix, sys.executable, "-c", "import cluster_manager, torch"], env=env)
    if reach.returncode != 0:
        return failed(f"{SANDBOX_USER} cannot import cluster_manager and torch", reach.said())
    return _sandboxed(ctx, prefix=prefix, env=env, who=SANDBOX_USER, cwd=home)


def _ordinary_user(home: Path) -> str:
    """Makes SANDBOX_USER (no login, no password) and its home; says what failed, if anything."""
    try:
        pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", SANDBOX_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            return f"useradd failed: {made.stderr.strip()}"
    entry = pwd.getpwnam(SANDBOX_USER)
    home.mkdir(parents=True, exist_ok=True)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return ""


def _sandboxed(
    ctx: RowContext,
    *,
    prefix: list[str],
    env: dict[str, str],
    who: str,
    cwd: Path | None = None,
) -> Outcome:
    """vectoradd in Python and in CUDA, tests only, in the sandbox, pinned to GPU 0."""
    examples = ctx.setting.examples
    runs = [("vectoradd_py", "submission.py"), ("vectoradd_cu", "submission.cu")]

    def one(run: tuple[str, str]) -> Outcome:
        task = examples / run[0]
        result, proc = run_eval(
            ctx,
            task,
            task / run[1],
            "test",
            "--sandbox",
            env=env,
            prefix=prefix,
            cwd=cwd,
        )
        if result is None:
            return failed(f"{run[0]}: no RunResult (exit {proc.returncode})", proc.said())
        judged = judges.sandbox(result)
        return replace(judged, figures=f"{run[0]}: {judged.figures}")

    python, cuda = ctx.map(one, runs, 2)
    figures = f"as {who}: {python.figures}; {cuda.figures.split(':')[0]} {cuda.status}"
    details = "\n".join(o.details for o in (python, cuda) if o.details)
    if python.status == cuda.status == "pass":
        return passed(figures, details)
    return failed(figures, details or f"{python.figures}\n{cuda.figures}")
