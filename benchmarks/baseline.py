"""The committed baseline (`benchmarks/baseline.json`) and each figure's ratio to it.

A target says what is good enough; the baseline says what the code did when it was last
written down, so a change that makes a figure a third worse fails `make bench` even while the
target still passes (ranking_p95_ms went from 1.1 to 18.6 ms under a 20 ms target unnoticed).
It is rewritten only on purpose, when a change is meant to move a figure:

    .venv/bin/python benchmarks/run.py --write-baseline            # every figure
    .venv/bin/python benchmarks/run.py --write-baseline ranking    # one module's figures

Most figures are better lower (times, memory, errors, requests); `HIGHER_IS_BETTER` lists the
others. A few figures sit so close to zero that this machine's noise moves them by more than a
third between quiet runs: they regress only when also worse by more than their `NOISE` (in
their own unit). Figures about the machine rather than the code are not compared.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parent / "baseline.json"
# Worse than the baseline by more than this fraction of it is a regression.
WORSE_BY = 1 / 3
HIGHER_IS_BETTER = frozenset({"fleet_throughput_per_min"})
NOT_COMPARED = frozenset({"kernel_alone_spread"})  # the machine's noise floor, not the code's
# Absolute changes this VM shows between quiet runs of unchanged code (docs/PERFORMANCE.md).
NOISE = {
    "harness_exit_ms": 10.0,
    "sandbox_overhead_ms_root": 10.0,
    "sandbox_overhead_ms_unprivileged": 10.0,
    "timing_error_pct_max": 0.5,
    "ranked_timing_error_pct_max": 1.0,
    "ranked_vs_benchmark_ratio_max": 0.3,
    "ranked_vs_benchmark_ratio_max_busy": 0.3,
    "ranked_score_spread": 0.5,
    "github_overhead_s_p50": 0.05,
    "queue_overhead_ms_per_job": 2.0,
    "ranking_p95_ms": 1.0,
    "metrics_scrape_ms": 1.0,
    "api_p95_ms": 2.0,
    "web_leaderboard_page_p95_ms": 3.0,
    "api_p95_ms_200_streams": 10.0,
    "workflow_setup_s_cold": 30.0,
    "workflow_setup_s_warm": 1.0,
}


def load(path: Path = BASELINE) -> dict[str, dict[str, Any]]:
    """The baseline's figures by name (empty when there is no baseline yet)."""
    if not path.is_file():
        return {}
    figures: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["figures"]
    return figures


def ratio(name: str, value: float | None, base: dict[str, Any] | None) -> float | None:
    """value / baseline, or None when either is missing, zero, or the figure is not compared."""
    if name in NOT_COMPARED or value is None or base is None or not base.get("value"):
        return None
    return float(value) / float(base["value"])


def regressed(name: str, value: float | None, base: dict[str, Any] | None) -> bool:
    """Worse than the baseline by more than a third (and by more than the figure's noise)."""
    if name in NOT_COMPARED or value is None or base is None or base.get("value") is None:
        return False
    before = float(base["value"])
    if name in HIGHER_IS_BETTER:  # below three quarters of it: the baseline over it is > 4/3
        worse, allowed = before - value, before * (1 - 1 / (1 + WORSE_BY))
    else:
        worse, allowed = value - before, before * WORSE_BY
    return worse > max(allowed, NOISE.get(name, 0.0))


def written(
    figures: dict[str, dict[str, Any]], machine: dict[str, Any], path: Path = BASELINE
) -> list[str]:
    """Writes the measured figures into the baseline (others keep their entries); their names.
    A figure that failed to measure keeps its old entry."""
    data: dict[str, Any] = {"figures": {}}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
    today = datetime.now(UTC).isoformat(timespec="seconds")
    names = []
    for name, fig in figures.items():
        if fig.get("error") or fig.get("value") is None:
            continue
        data["figures"][name] = {"value": fig["value"], "unit": fig["unit"], "measured": today}
        names.append(name)
    data["figures"] = dict(sorted(data["figures"].items()))
    data["machine"] = {k: v for k, v in machine.items() if k != "loadavg_1m"}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return names
