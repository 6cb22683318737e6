"""The rows of the check, in the order of the table. Budgets add up to more than the check's
deadline on purpose: a row rarely needs its whole limit, and the deadline bounds the sum."""

from __future__ import annotations

from gpu_check.outcome import Row
from gpu_check.rows_examples import (
    examples_check,
    examples_eval,
    examples_ranked,
    sandbox_root,
    sandbox_user,
)
from gpu_check.rows_measure import profile, ranked_spread, telemetry, timing
from gpu_check.rows_suites import hostile, problem_sets

ROWS: tuple[Row, ...] = (
    Row("examples-check", "leaderboard check of the shipped examples", examples_check, 150),
    Row(
        "examples-eval",
        "each example's submission in test, benchmark and profile modes",
        examples_eval,
        240,
    ),
    Row(
        "examples-ranked",
        "each example's submission in leaderboard mode, one at a time",
        examples_ranked,
        150,
        quiet=True,
    ),
    Row("sandbox-root", "full sandbox as root, only GPU 0's device nodes", sandbox_root, 150),
    Row("sandbox-user", "full sandbox started by an ordinary user", sandbox_user, 150),
    Row(
        "telemetry",
        "NVML clocks, temperature, power, throttle reasons of a ranked run",
        telemetry,
        150,
        quiet=True,
    ),
    Row("profile", "profile mode with Nsight Compute; its report comes back", profile, 240),
    Row(
        "timing",
        "ranked score of a known kernel vs triton's do_bench, within 5 %",
        timing,
        90,
        quiet=True,
    ),
    Row("hostile", "the hostile tests of tests/adversarial/test_gpu.py", hostile, 180, quiet=True),
    Row(
        "problem-sets",
        "leaderboard check of reference-kernels' problems this GPU stands in for",
        problem_sets,
        300,
    ),
    Row(
        "ranked-spread",
        "five ranked runs of the known kernel within 10 % of each other and of its benchmark",
        ranked_spread,
        240,
        quiet=True,
        by_default=False,
    ),
)


def select_rows(rows: tuple[Row, ...], only: list[str] | None, skip: list[str] | None) -> list[Row]:
    """The rows `--only` names (when none, all that run by default), less those `--skip`
    names."""
    known = {r.name for r in rows}
    unknown = sorted({*(only or ()), *(skip or ())} - known)
    if unknown:
        raise ValueError(f"unknown row(s) {', '.join(unknown)} (rows: {', '.join(sorted(known))})")
    chosen = [r for r in rows if r.name in only] if only else [r for r in rows if r.by_default]
    return [r for r in chosen if r.name not in (skip or ())]
