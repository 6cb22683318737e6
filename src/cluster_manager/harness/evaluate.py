"""The built-in eval harness: `python -m cluster_manager.harness.evaluate MODE TESTS_FILE`.

It speaks the popcorn protocol like the public problem sets' `eval.py`, with these guarantees:
- This process holds the result pipe, the secret seed, the reference and the clock; it never
  imports the submission. Workers (`worker.py`, spawned) import it and get neither the pipe
  (not inherited) nor the seed (removed from the environment before they start), nor any
  seed at all: every input is generated here and sent to them as data, so hooking the task's
  generator in a worker moves no work off the clock.
- Every check runs here, on outputs the workers send back as `torch.save` bytes (read with
  `torch.load(weights_only=True)`: data, never code), against the inputs made here. Patching
  the reference or the harness inside a worker changes nothing here.
- Every timed call is timed here, and scored by this clock, never by what the worker
  reports (`trusted.py`): right before or after each, with every process of the submission
  stopped, a trusted stand-in moves the same data, and the call's duration is its window less
  what moving took. The submission runs only inside its calls (`workers.py`).
- In ranked mode every timed iteration gets fresh inputs, from seeds drawn here that nothing
  can predict, and its output is checked; the kernel always works on a copy. Ranked case
  seeds are a keyed hash of the public ones with the secret as key.

Tasks that use it must generate inputs deterministically from their arguments (the seed) and
check outputs without collective communication: both run here as well as in the workers.

The work is split by job: `workers.py` (the pipes to the workers and the stand-in),
`case_run.py` (one case on its ranks), `cases.py` (each mode's steps on a case), `paired.py`
(the timed loop), `trusted.py` (its score), `checks.py` (the reference, run here),
`reporting.py` (the result pipe); this module runs a mode's cases and is the command line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from cluster_manager.core import protocol
from cluster_manager.core.models import Case
from cluster_manager.harness import timing
from cluster_manager.harness.case_run import CaseRun, world_size_of
from cluster_manager.harness.cases import benchmark_case, check_case, profile_case
from cluster_manager.harness.checks import Reference
from cluster_manager.harness.outcome import CaseFailed, Outcome
from cluster_manager.harness.reporting import Reporter
from cluster_manager.harness.trusted import MIN_PAIRS
from cluster_manager.harness.workers import Workers
from cluster_manager.sandbox.lifecycle import make_undumpable

MAX_BENCHMARK_BUDGET_S = 3.0
# Ranked runs take enough calls, budget permitting, that the few whose windows a preempted
# process stretched do not move the clock's median (`trusted.TrustedClock.clock_ns`).
RANKED_MIN_RUNS = 100
# Quick calls get their minimum of pairs even where starting up on a loaded machine spent the
# phase's budget: within the fifth of the time limit the budget leaves free (the shortest
# limits, 4 s, leave 0.8 s).
FLOOR_GRACE_S = 0.5
HARNESS_MODULE = "cluster_manager.harness.evaluate"
# Where a restarted harness finds the secret seed (see `_restart_without_the_seed`).
SEED_FD_ENV = "CLUSTER_MANAGER_SEED_FD"


class Harness:
    """Runs a mode's cases through the workers and logs each outcome to the result pipe."""

    def __init__(self, out: Reporter, workers: Workers, reference: Reference) -> None:
        self.out = out
        self.workers = workers
        self.reference = reference

    def case(self, args: Case, body: Callable[[CaseRun], Outcome]) -> Outcome:
        case = CaseRun(self.workers, self.reference, args)
        try:
            case.open()
            try:
                return body(case)
            finally:
                case.close()
        except CaseFailed as failed:
            if failed.worker_lost:
                self.workers.replace(case.ranks)
            return failed.outcome

    def run_tests(self, cases: list[tuple[str, Case]]) -> bool:
        passed = True
        self.out.log("test-count", len(cases))
        for i, (spec, args) in enumerate(cases):
            self.out.log(f"test.{i}.spec", spec)
            outcome = self.case(args, check_case)
            if outcome.ok:
                self.out.log(f"test.{i}.status", "pass")
                if outcome.message:
                    self.out.log(f"test.{i}.message", outcome.message)
            else:
                self.out.failure(f"test.{i}", outcome)
                passed = False
        return passed

    def run_benchmarks(
        self,
        cases: list[tuple[str, Case]],
        *,
        recheck: bool,
        budget_s: float,
        case_cap_s: float = MAX_BENCHMARK_BUDGET_S,
    ) -> bool:
        per_case = min(MAX_BENCHMARK_BUDGET_S, case_cap_s, budget_s / max(len(cases), 1))
        rule = timing.StopRule(
            wall_budget_ns=per_case * 1e9,
            floor_runs=MIN_PAIRS,
            floor_grace_ns=FLOOR_GRACE_S * 1e9,
        )
        if recheck:
            rule = replace(rule, min_runs=RANKED_MIN_RUNS)
        passed = True
        self.out.log("benchmark-count", len(cases))
        began = time.monotonic()
        for i, (spec, args) in enumerate(cases):
            self.out.log(f"benchmark.{i}.spec", spec)
            # A slow case may run past its share for its minimum of pairs, from what earlier
            # cases left unused: every later case keeps its share.
            spare_s = budget_s - (time.monotonic() - began) - per_case * (len(cases) - i - 1)
            case_rule = replace(rule, floor_budget_ns=max(per_case, spare_s) * 1e9)
            outcome = self.case(args, functools.partial(benchmark_case, rule=case_rule))
            if outcome.ok and outcome.stats is not None:
                for name in protocol.BENCHMARK_STATS:
                    self.out.log(f"benchmark.{i}.{name}", getattr(outcome.stats, name))
            else:
                self.out.failure(f"benchmark.{i}", outcome)
                passed = False
                if recheck:
                    break  # a ranked run stops at its first failure
        return passed

    def run_profiles(self, cases: list[tuple[str, Case]]) -> bool:
        passed = True
        self.out.log("benchmark-count", len(cases))
        for i, (spec, args) in enumerate(cases):
            self.out.log(f"benchmark.{i}.spec", spec)
            outcome = self.case(args, profile_case)
            if outcome.ok:
                self.out.log(f"benchmark.{i}.report", protocol.encode_report(outcome.report))
                if outcome.trace:
                    self.out.log(f"benchmark.{i}.trace", outcome.trace)
            else:
                self.out.failure(f"benchmark.{i}", outcome)
                passed = False
        return passed


def _restart_without_the_seed(argv: list[str]) -> NoReturn:
    """Every fork of this process carries the strings of the environment it started with, the
    secret seed among them: the seed goes into a pipe, and the harness starts again without
    it in its environment (it reads the pipe once the zygote has forked)."""
    seed = os.environ.pop(protocol.ENV_SEED)
    read, write = os.pipe()
    os.write(write, seed.encode())
    os.close(write)
    os.set_inheritable(read, True)
    command = [sys.executable, "-m", HARNESS_MODULE]
    sys.stdout.flush()
    sys.stderr.flush()
    env = {**os.environ, SEED_FD_ENV: str(read)}
    os.execve(sys.executable, [*command, *argv], env)  # noqa: S606 - our own interpreter


def _take_seed(fd_raw: str | None) -> str | None:
    if not fd_raw:
        return None
    with os.fdopen(int(fd_raw), "rb") as pipe:
        return pipe.read().decode() or None


def _mix_in_the_secret(cases: list[tuple[str, Case]], seed_raw: str | None) -> None:
    """Each case's seed, combined with the secret one (a ranked run's): no submission can
    know the inputs ahead."""
    if not seed_raw:
        return
    secret = int(seed_raw)
    for _, case in cases:
        seed = case.get("seed")
        if protocol.is_integer(seed):
            case["seed"] = protocol.combine_seed(seed, secret)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    argv = sys.argv[1:] if argv is None else argv
    if protocol.ENV_SEED in os.environ:
        _restart_without_the_seed(argv)
    seed_fd = os.environ.pop(SEED_FD_ENV, None)
    fd_raw = os.environ.pop(protocol.ENV_FD, None)
    gpus = int(os.environ.pop(protocol.ENV_GPUS, "1") or 1)
    budget_s = float(os.environ.pop(protocol.ENV_TIME_BUDGET, "60") or 60)
    case_cap_s = float(os.environ.pop(protocol.ENV_CASE_BUDGET, "") or MAX_BENCHMARK_BUDGET_S)
    # Keeps the workers (same user) out of /proc/<pid>/fd, environ and mem, and from ptrace.
    make_undumpable()
    if not fd_raw:
        print(f"{protocol.ENV_FD} is not set", file=sys.stderr)
        return protocol.EXIT_PIPE_FAIL
    if len(argv) != 2:
        print("usage: evaluate MODE TESTS_FILE", file=sys.stderr)
        return 2
    mode, tests_file = argv
    if mode not in ("test", "benchmark", "leaderboard", "profile"):
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    try:
        cases = protocol.parse_tests_file(Path(tests_file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read test cases from {tests_file}: {exc}", file=sys.stderr)
        return protocol.EXIT_TEST_SPEC
    # Started before anything secret is read: the zygote that forks them is a copy of this
    # process as it is now.
    workers = Workers(
        gpus if any(world_size_of(c) for _, c in cases) else 1,
        timed=mode in ("benchmark", "leaderboard"),
    )
    _mix_in_the_secret(cases, _take_seed(seed_fd))

    out = Reporter(int(fd_raw))
    try:
        reference = Reference()
        harness = Harness(out, workers, reference)
        if mode == "test":
            passed = harness.run_tests(cases)
        elif mode == "profile":
            passed = harness.run_profiles(cases)
        else:
            # The budget is the phase's: what starting up took is spent.
            left_s = max(budget_s - (time.monotonic() - started), 0.0)
            passed = harness.run_benchmarks(
                cases, recheck=mode == "leaderboard", budget_s=left_s, case_cap_s=case_cap_s
            )
        out.log("check", "pass" if passed else "fail")
        return 0 if passed else protocol.EXIT_TEST_FAIL
    finally:
        workers.close()
        out.close()


def leave(code: int) -> NoReturn:
    """Ends the process without the interpreter's teardown, which with torch loaded takes
    ~0.3 s of every phase after its results have gone. Nothing here needs it: the workers
    are stopped and the pipe closed (main's `finally`); its workers leave the same way."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
