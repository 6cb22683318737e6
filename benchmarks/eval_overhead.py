"""eval_overhead_ratio: `cluster-manager eval` versus the task's harness run by hand.

Both sides run the identity example's tests. The eval side is the whole command as a user
types it (CLI start-up, the runner child, materialising, the harness, the report). The direct
side materialises the same files in a temporary directory and starts
`python -m cluster_manager.harness.evaluate test cases.txt` with a POPCORN_FD pipe, timed
from the start of the process to its exit. Runs alternate so drift on a noisy machine hits
both sides alike; one untimed warm-up of each comes first.

`harness_exit_ms`: how long the harness's process lives on after its pipe has closed, the
median of the direct runs. Every phase of every run waits for it; the interpreter's teardown
with torch loaded took ~300 ms of it before the harness left without it.
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
EXIT_TARGET_MS = 50.0
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


def time_direct() -> tuple[float, float]:
    """The harness run by hand: seconds from its start to its exit, and from its pipe's end
    to its exit."""
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
        pipe_closed = time.perf_counter()
        proc.wait()
        exited = time.perf_counter()
    if proc.returncode != 0 or "check: pass" not in lines:
        raise RuntimeError(f"the harness exited {proc.returncode}: {lines[-500:]}")
    return exited - began, exited - pipe_closed


def measure(runs: int = RUNS) -> list[Figure]:
    log("warm-up (one untimed run of each)")
    time_eval()
    time_direct()
    evals: list[float] = []
    directs: list[float] = []
    exits: list[float] = []
    for i in range(runs):
        evals.append(time_eval())
        direct, exit_lag = time_direct()
        directs.append(direct)
        exits.append(exit_lag * 1000)
        log(
            f"run {i + 1}/{runs}: eval {evals[-1]:.2f} s, harness {direct:.2f} s "
            f"(its exit {exits[-1]:.0f} ms after its pipe)"
        )
    eval_median, direct_median = median(evals), median(directs)
    exit_figure = Figure(
        "harness_exit_ms",
        round(median(exits), 1),
        "ms",
        EXIT_TARGET_MS,
        details={"ms": rounded(exits)},
    )
    return [
        exit_figure,
        Figure(
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
        ),
    ]


def main() -> int:
    try:
        figures = measure()
    except Exception as exc:
        figures = [
            Figure("harness_exit_ms", None, "ms", EXIT_TARGET_MS, error=repr(exc)),
            Figure("eval_overhead_ratio", None, "ratio", TARGET, error=repr(exc)),
        ]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
