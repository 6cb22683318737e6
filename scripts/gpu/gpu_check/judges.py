"""Each row's verdict on what the project's commands printed: the RunResult of `eval --json`,
the rows of `leaderboard check --json`, pytest's JUnit report. Pure functions of that text."""

from __future__ import annotations

import base64
import csv
import io
import json
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cluster_manager.core.profiling import NCU
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.telemetry import SAMPLED_MODES, summary_line
from gpu_check.outcome import Outcome, failed, passed

TIMING_TOLERANCE = 0.05  # the harness's score within 5 % of the independent measurement
SPREAD_TARGET = 1.10  # ranked scores of one file, largest over smallest; ranked over benchmark
# What a sampled GPU reads on a working machine; outside these, the probe misreads.
PLAUSIBLE = {
    "sm_clock_mhz": (100.0, 4000.0),
    "mem_clock_mhz": (100.0, 20000.0),
    "temperature_c": (5.0, 110.0),
    "power_w": (5.0, 2000.0),
    "power_limit_w": (50.0, 2000.0),
}
MIN_SAMPLES = 3


def run_result(stdout: str) -> RunResult:
    """The RunResult `eval --json` printed (ValueError when it printed none)."""
    try:
        return RunResult.from_json(json.loads(stdout))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"no RunResult JSON in its output ({exc})") from None


def sandbox(result: RunResult) -> Outcome:
    """A full sandbox, showing only the run's own GPU's device nodes, and the run passed."""
    system = result.system
    level, nodes = system.get("sandbox", "?"), system.get("gpu_nodes", "")
    count = int(system.get("device_count") or 0)
    problems = []
    if not result.passed:
        problems.append(f"the run did not pass: {result.verdict.value}: {result.message}")
    if level != "full":
        problems.append(f"the sandbox is {level}: {system.get('sandbox_reason', '?')}")
    if count < 1:
        problems.append("the run saw no GPU")
    # "all" of a machine with one GPU are that GPU's own nodes.
    if not (nodes == "own only" or (nodes == "all" and count == 1)):
        problems.append(f"GPU device nodes shown: {nodes or 'not said'} of {count} GPU(s)")
    if system.get("syscalls") != "filtered":
        problems.append(f"system calls: {system.get('syscalls', '?')}")
    figures = (
        f"{level}, user {system.get('user', '?')}, GPU nodes: {nodes or '?'} of {count}, "
        f"syscalls {system.get('syscalls', '?')}"
    )
    return failed(figures, "\n".join(problems)) if problems else passed(figures)


def telemetry(result: RunResult) -> Outcome:
    """NVML's clocks, temperature, power and throttle reasons, read during the timed phase."""
    phase = next((result.telemetry[m] for m in SAMPLED_MODES[::-1] if m in result.telemetry), None)
    if phase is None:
        return failed("no telemetry in the RunResult", json.dumps(result.to_json()["telemetry"]))
    problems = []
    if "nvml" not in phase.probe.lower():
        problems.append(f"probe {phase.probe!r}, not NVML: {phase.unavailable}")
    if phase.samples < MIN_SAMPLES:
        problems.append(f"{phase.samples} samples ({phase.unavailable or 'phase too short?'})")
    for name, (low, high) in PLAUSIBLE.items():
        spread = phase.quantities.get(name)
        if spread is None:
            problems.append(f"{name} was not read")
        elif not low <= spread.median <= high:
            problems.append(f"{name} median {spread.median} is outside {low:g}–{high:g}")
    if not 0.0 <= phase.throttled_share <= 1.0:
        problems.append(f"throttled share {phase.throttled_share} is not a share")
    reasons = ", ".join(phase.reasons) or "none"
    figures = f"{summary_line(result.telemetry) or 'GPU: nothing sampled'}; throttle: {reasons}"
    return failed(figures, "\n".join(problems)) if problems else passed(figures)


def profile(result: RunResult) -> tuple[Outcome, bytes]:
    """Nsight Compute's report came back whole, with the kernels it captured; and the report."""
    found = [p.profiler for p in result.phases if p.profiler is not None]
    if not found:
        return failed(f"no profile phase ran: {result.verdict.value}: {result.message}"), b""
    profiler = found[-1]
    if profiler.tool != NCU or not profiler.report:
        return failed(profiler.summary(), profiler.note), b""
    report = base64.b64decode(profiler.report)
    if len(report) != profiler.report_bytes:
        return failed(f"report of {len(report)} bytes, {profiler.report_bytes} announced"), b""
    kernels = _kernels(profiler.details)
    figures = f"ncu report {len(report) / 1024:.0f} KiB, {len(kernels)} kernel(s): "
    figures += ", ".join(sorted(kernels)[:3]) + ("…" if len(kernels) > 3 else "")
    if not result.passed:
        return failed(figures, f"the run did not pass: {result.message}"), report
    return (passed(figures) if kernels else failed(figures, "no kernel in its details")), report


def _kernels(details: str) -> set[str]:
    """The names of the kernels in `ncu --import --csv --page details` (ncu prints lines of its
    own before the CSV)."""
    lines = details.splitlines()
    start = next((i for i, line in enumerate(lines) if '"Kernel Name"' in line), None)
    if start is None:
        return set()
    rows = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    return {row["Kernel Name"] for row in rows if row.get("Kernel Name")}


def timing(harness_s: float, independent_s: float, how: str) -> Outcome:
    """The harness's score against an independent measurement of the same kernel."""
    ratio = harness_s / independent_s
    figures = (
        f"harness {harness_s * 1e3:.4f} ms, {how} {independent_s * 1e3:.4f} ms, ratio {ratio:.3f}"
    )
    if round(abs(ratio - 1.0), 9) <= TIMING_TOLERANCE:  # 5 % exactly is within
        return passed(figures)
    return failed(figures, f"the ratio is outside 1 ± {TIMING_TOLERANCE:g}")


def spread(scores_s: Sequence[float], benchmark_s: float) -> Outcome:
    """Ranked scores of one file against each other and against its benchmark mean."""
    widest = max(scores_s) / min(scores_s)
    ratio = statistics.median(scores_s) / benchmark_s
    figures = (
        f"scores {', '.join(f'{s * 1e3:.4f}' for s in scores_s)} ms: spread {widest:.3f}; "
        f"median over benchmark {ratio:.3f}"
    )
    misses = [
        f"{name} {value:.3f} is over {SPREAD_TARGET:g}"
        for name, value in (("the spread", widest), ("ranked over benchmark", ratio))
        if value > SPREAD_TARGET
    ]
    return failed(figures, "; ".join(misses)) if misses else passed(figures)


@dataclass(frozen=True)
class Checked:
    """What `leaderboard check --json` said of each task."""

    passed: tuple[str, ...]
    failed: tuple[tuple[str, str], ...]  # (name, first error)
    needs: tuple[tuple[str, str, str], ...]  # (name, what it needs that this machine lacks, why)


def checked(rows: Sequence[dict[str, Any]]) -> Checked:
    return Checked(
        passed=tuple(r["name"] for r in rows if r.get("passed")),
        failed=tuple((r["name"], first_line(r.get("error", ""))) for r in rows if not r.get("ok")),
        needs=tuple(
            (r["name"], r["needs"], first_line(r.get("error", "")))
            for r in rows
            if r.get("ok") and r.get("needs")
        ),
    )


def first_line(text: str, limit: int = 160) -> str:
    """The line that says most: a traceback's last, else the first."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines and lines[0].startswith("Traceback") else (lines or ["?"])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True)
class TestRun:
    counts: dict[str, int]  # tests, failures, errors, skipped
    cases: tuple[tuple[str, str, str], ...]  # (test, outcome, what it observed)


def junit(xml: str) -> TestRun:
    """pytest's `--junitxml` report: the counts, and each test's outcome and `observed`."""
    root = ET.fromstring(xml)  # noqa: S314 (written by the pytest this check ran)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise ValueError("no testsuite in the report")
    counts = {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}
    cases = []
    for case in suite.iter("testcase"):
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        observed = next(
            (p.get("value", "") for p in case.iter("property") if p.get("name") == "observed"),
            "",
        )
        cases.append((case.get("name", "?"), outcome, observed))
    return TestRun(counts, tuple(cases))
