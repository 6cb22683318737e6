"""Whether the judging ever fails an honest kernel: the shipped examples' solutions and
templates, benchmark and ranked runs, through the runner in the full sandbox, with nothing,
one busy core and two busy cores beside them.

- `honest_false_verdicts`: runs that did not pass (target 0). Each failure is listed with
  its file, mode, load and message.
- `honest_runs` (informative): how many runs that is (`ROUNDS` times every file, mode and
  load; `CM_BENCH_HONEST_ROUNDS` changes it).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator

from benchlib import Figure, log, report

from cluster_manager.core.models import Limits, Mode, RunRequest, Task
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR

EXAMPLES = ("identity_py", "vectoradd_py", "softmax_py", "allreduce_py")
FILES = ("submission.py", "template.py")
MODES = (Mode.BENCHMARK, Mode.LEADERBOARD)
LOADS = (0, 1, 2)  # busy cores beside the run
# 4 examples x 2 files x 2 modes x 3 loads = 48 runs a round: 7 rounds are 336 runs.
ROUNDS = int(os.environ.get("CM_BENCH_HONEST_ROUNDS", "7"))
# The tasks' own time limits, as competitors get them; each case's share of a phase is capped
# instead, so a run takes seconds rather than its whole budget.
CASE_BUDGET_S = 0.3
SECRET = 20261128


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def run(task: Task, code: str, mode: Mode, round_: int) -> RunResult:
    from cluster_manager.harness import runner  # imports torch: only when a run is made

    request = RunRequest(
        task=task,
        submission_name=task.submission_name,
        submission_code=code,
        mode=mode,
        secret_seed=SECRET + round_ if mode is Mode.LEADERBOARD else None,
        limits=Limits(benchmark_case_s=CASE_BUDGET_S),
    )
    return runner.run(request, isolate=True)


def measure(rounds: int = ROUNDS, examples: tuple[str, ...] = EXAMPLES) -> list[Figure]:
    tasks = {name: load_task(EXAMPLES_DIR / name) for name in examples}
    failed: list[str] = []
    runs = 0
    for round_, load in itertools.product(range(rounds), LOADS):
        log(f"round {round_ + 1}/{rounds}, {load} busy core(s)")
        with busy_cores(load):
            for name, file, mode in itertools.product(examples, FILES, MODES):
                code = (EXAMPLES_DIR / name / file).read_text()
                result = run(tasks[name], code, mode, round_)
                runs += 1
                if not result.passed:
                    failed.append(f"{name}/{file} {mode.value}, {load} busy: {result.message}")
                    log(f"FAILED {failed[-1]}")
    return [
        Figure("honest_false_verdicts", len(failed), "runs", 0, details={"failed": failed}),
        Figure("honest_runs", runs, "runs", None),
    ]


def main() -> int:
    return report(measure())


if __name__ == "__main__":
    sys.exit(main())
