"""Suites beyond the examples: the GPU hostile tests, and the public problem sets' references."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpu_check import judges
from gpu_check.commands import CLI, quick_env, write_out
from gpu_check.outcome import Outcome, failed, passed, skipped
from gpu_check.problem_sets import carried_problems, select
from gpu_check.rows_runner import RowContext

HOSTILE_TESTS = "tests/adversarial/test_gpu.py"
CHECK_WORKERS = 4  # competition files checked at once: each checks its tasks one by one


def hostile(ctx: RowContext) -> Outcome:
    """The ranked-timing attacks that need a GPU, as the test suite has them."""
    report = ctx.setting.work / "hostile.xml"
    proc = ctx.run(
        [
            sys.executable,
            "-m",
            "pytest",
            HOSTILE_TESTS,
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            f"--junitxml={report}",
        ],
        cwd=ctx.setting.root,
    )
    try:
        run = judges.junit(report.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return failed(f"no test report ({exc})", proc.said())
    counts = run.counts
    figures = (
        f"{counts['tests']} tests: {counts['failures'] + counts['errors']} failed, "
        f"{counts['skipped']} skipped"
    )
    details = "\n".join(f"{name}: {outcome} — {seen or '—'}" for name, outcome, seen in run.cases)
    # A skip means torch saw no CUDA device in the test process: the attacks were not tried.
    good = counts["tests"] > 0 and not (counts["failures"] or counts["errors"] or counts["skipped"])
    if good and proc.returncode == 0:
        return passed(figures, details)
    return failed(figures, f"{details}\n{proc.said()}")


def problem_sets(ctx: RowContext) -> Outcome:
    """`leaderboard check --gpu TYPE` of each competition file (or its problems) that this GPU
    can stand in for; which pass."""
    problems = carried_problems(ctx.setting.carry)
    capability = ctx.setting.facts.get("capability")
    if problems is None:
        return skipped("no problem sets carried (make gpu-carry REFERENCE_KERNELS=PATH)")
    if not capability:
        return failed("the device's compute capability is unknown")
    selections = select(problems, (int(capability[0]), int(capability[1])))
    jobs = [(s.competition.name, t) for s in selections for t in s.targets()]

    def one(job: tuple[str, Path]) -> tuple[str, list[dict[str, object]], str]:
        file, target = job
        argv = [CLI, "leaderboard", "check", str(target), "--gpu", ctx.setting.gpu]
        proc = ctx.run([*argv, "--root", str(problems), "--json"], env=quick_env(ctx))
        try:
            return file, list(json.loads(proc.stdout)), ""
        except ValueError:
            return file, [], proc.said()

    done = ctx.map(one, jobs, CHECK_WORKERS)
    rows = [{"competition": file, **row} for file, found, _ in done for row in found]
    broken = [said for _, _, said in done if said]
    found = judges.checked(rows)
    left_out = [(s.competition.name, name, why) for s in selections for name, why in s.left_out]
    write_out(ctx, "problem-sets.json", json.dumps(rows, indent=2).encode())
    figures = _figures(rows, found, len(left_out), _commit(problems))
    details = _details(rows, found, left_out, broken)
    if broken or found.failed or not found.passed:  # none passed: nothing ran on the GPU
        return failed(figures, details)
    return passed(figures, details)


def _figures(rows: list[dict[str, object]], found: judges.Checked, left: int, commit: str) -> str:
    per_file: dict[str, list[int]] = {}
    for row in rows:
        tally = per_file.setdefault(str(row["competition"]), [0, 0])
        tally[0] += bool(row.get("passed"))
        tally[1] += 1
    files = ", ".join(f"{Path(f).stem} {p}/{n}" for f, (p, n) in per_file.items())
    needs = f", {len(found.needs)} need more" if found.needs else ""
    return f"{len(found.passed)} of {len(rows)} pass ({files}){needs}; {left} left out; {commit}"


def _details(
    rows: list[dict[str, object]],
    found: judges.Checked,
    left_out: list[tuple[str, str, str]],
    broken: list[str],
) -> str:
    lines = [f"passed: {', '.join(found.passed) or 'none'}"]
    lines += [f"FAILED {name}: {error}" for name, error in found.failed]
    lines += [f"needs {what}: {name} ({why})" for name, what, why in found.needs]
    lines += [f"left out: {file} {name} ({why})" for file, name, why in left_out]
    lines += [f"a check printed no JSON:\n{said}" for said in broken]
    return "\n".join(lines)


def _commit(problems: Path) -> str:
    try:
        return "reference-kernels " + (problems.parent / "COMMIT").read_text().strip()[:12]
    except OSError:
        return "reference-kernels (commit not recorded)"
