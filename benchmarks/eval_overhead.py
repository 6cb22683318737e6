"""eval_overhead_ratio: `cluster-manager eval` versus the task's harness run by hand.

Both sides run the identity example's tests. The eval side is the whole command as a user
types it (CLI start-up, the runner child, materialising, the harness, the report). The direct
side materialises the same files in a temporary directory and starts
`python -m cluster_manager.harness.evaluate test cases.txt` with a POPCORN_FD pipe, timed
from the start of the process to the end of the pipe. Runs alternate so drift on a noisy
machine hits both sides alike; one untimed warm-up of each comes first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import ROOT, Figure, log, median, report, rounded

from cluster_manager.core import protocol
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR

RUNS = 9
TARGET = 1.15
TASK = EXAMPLES_DIR / "identity_py"
SUBMISSION = TASK / "submission.py"
CLI = Path(sys.executable).with_name("cluster-manager")


def time_eval() -> float:
    command = [str(CLI), "eval", str(TASK), str(SUBMISSION)]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"cluster-manager eval exited {done.returncode}: {done.stderr[-500:]}")
    return elapsed


def materialise(workdir: Path) -> str:
    """Writes the task's files and the submission as the runner would; returns the cases file."""
    task = load_task(TASK)
    for file in task.files:
        content = SUBMISSION.read_text() if file.is_submission else file.content
        (workdir / file.name).write_text(content or "", encoding="utf-8")
    (workdir / "cases.txt").write_text(protocol.format_tests_file(task.tests), encoding="utf-8")
    return "cases.txt"


def time_direct() -> float:
    with tempfile.TemporaryDirectory(prefix="cm-bench-direct-") as tmp:
        workdir = Path(tmp)
        cases = materialise(workdir)
        read_end, write_end = os.pipe()
        env = {**os.environ, protocol.ENV_FD: str(write_end), "PYTHONDONTWRITEBYTECODE": "1"}
        command = [sys.executable, "-m", "cluster_manager.harness.evaluate", "test", cases]
        began = time.perf_counter()
        proc = subprocess.Popen(
            command, cwd=workdir, env=env, pass_fds=(write_end,), stdout=subprocess.DEVNULL
        )
        os.close(write_end)
        with os.fdopen(read_end, "r", encoding="utf-8") as pipe:
            lines = pipe.read()
        proc.wait()
        elapsed = time.perf_counter() - began
    if proc.returncode != 0 or "check: pass" not in lines:
        raise RuntimeError(f"the harness exited {proc.returncode}: {lines[-500:]}")
    return elapsed


def measure(runs: int = RUNS) -> Figure:
    log("warm-up (one untimed run of each)")
    time_eval()
    time_direct()
    evals: list[float] = []
    directs: list[float] = []
    for i in range(runs):
        evals.append(time_eval())
        directs.append(time_direct())
        log(f"run {i + 1}/{runs}: eval {evals[-1]:.2f} s, harness {directs[-1]:.2f} s")
    eval_median, direct_median = median(evals), median(directs)
    return Figure(
        "eval_overhead_ratio",
        eval_median / direct_median,
        "ratio",
        TARGET,
        details={
            "runs": runs,
            "eval_median_s": round(eval_median, 4),
            "harness_median_s": round(direct_median, 4),
            "overhead_median_s": round(eval_median - direct_median, 4),
            "eval_s": rounded(evals),
            "harness_s": rounded(directs),
        },
    )


def main() -> int:
    try:
        figure = measure()
    except Exception as exc:
        figure = Figure("eval_overhead_ratio", None, "ratio", TARGET, error=repr(exc))
    return report([figure])


if __name__ == "__main__":
    sys.exit(main())
