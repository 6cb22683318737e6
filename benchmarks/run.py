"""Runs every benchmark, writes benchmarks/results.json and prints one table.

    .venv/bin/python benchmarks/run.py            # or: make bench (every module)
    .venv/bin/python benchmarks/run.py --quick    # or: make bench-quick (all but LONG_MODULES)
    .venv/bin/python benchmarks/run.py ranking    # only some modules, by name (not written)
    .venv/bin/python benchmarks/run.py --write-baseline [MODULE ...]   # and keep them as the
                                                  # baseline (benchmarks/baseline.json)

Each module runs in a process of its own (so one's threads, memory and event loop cannot
disturb the next), one after the other. The table shows each figure's ratio to the committed
baseline (`baseline.py`). The exit status is 1 when a figure misses its target, is more than a
third worse than its baseline, or a module fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import baseline
from benchlib import machine, table, verdict

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
MODULE_TIMEOUT_S = 600
# Ranked runs of softmax take 15-30 s each (its last case's ten pairs move 16 MiB both ways);
# honest_verdicts makes 336 runs of 10-20 s each.
LONGER_MODULES_S = {"ranked_timing": 1800, "honest_verdicts": 7200}
# Cheapest and most sensitive to noise first, the database bulk load last but one.
MODULES = (
    "eval_overhead",
    "sandbox_overhead",
    "timing_error",
    "case_transfer",
    "ranked_timing",
    "honest_verdicts",
    "github_overhead",
    "github_requests",
    "queue_overhead",
    "fleet",
    "metrics_scrape",
    "ranking",
    "api_streams",
    "bot_rss",
    "workflow_setup",
)
# Left out by --quick: 336 sandboxed runs, close to an hour; its figure changes only with the
# rule that judges ranked timing (docs/MEASUREMENT.md), so a quick run while working on
# anything else loses nothing.
LONG_MODULES = ("honest_verdicts",)
# What a module that crashed would have reported.
FIGURES = {
    "eval_overhead": ("eval_overhead_ratio", "harness_exit_ms"),
    "sandbox_overhead": ("sandbox_overhead_ms_root", "sandbox_overhead_ms_unprivileged"),
    "timing_error": ("timing_error_pct_max", "ranked_timing_error_pct_max"),
    "case_transfer": ("case_transfer_ms_16mib", "raw_pipe_ms_16mib"),
    "ranked_timing": (
        "ranked_vs_benchmark_ratio_max",
        "ranked_vs_benchmark_ratio_max_busy",
        "ranked_score_spread",
        "kernel_alone_spread",
        "ranked_pairs_failed",
    ),
    "honest_verdicts": ("honest_false_verdicts", "honest_runs"),
    "github_overhead": ("github_overhead_s_p50",),
    "github_requests": tuple(f"github_requests_per_min_at_{n}" for n in (1, 10, 100)),
    "queue_overhead": ("queue_overhead_ms_per_job",),
    "fleet": (
        "fleet_throughput_per_min",
        "fleet_queue_wait_p95_s",
        "fleet_wait_p95_over_ideal",
        "fleet_user_wait_p95_ratio",
    ),
    "metrics_scrape": ("metrics_scrape_ms",),
    "ranking": ("ranking_p95_ms", "api_p95_ms", "web_leaderboard_page_p95_ms"),
    "api_streams": ("api_rss_mb_200_streams", "api_p95_ms_200_streams"),
    "bot_rss": ("bot_rss_mb_idle", "bot_rss_mb_100_inflight"),
    "workflow_setup": ("workflow_setup_s_cold", "workflow_setup_s_warm"),
}


def run_module(name: str) -> tuple[dict[str, Any], float]:
    """Runs one module; its figures (or errors standing in for them) and its wall time."""
    print(f"== {name}", file=sys.stderr, flush=True)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cm-bench-") as tmp:
        out = Path(tmp) / f"{name}.json"
        command = [sys.executable, str(HERE / f"{name}.py"), "--json", str(out)]
        limit_s = LONGER_MODULES_S.get(name, MODULE_TIMEOUT_S)
        try:
            done = subprocess.run(command, timeout=limit_s, check=False)
            problem = None if out.is_file() else f"exited {done.returncode} without figures"
        except subprocess.TimeoutExpired:
            problem = f"did not finish within {limit_s} s"
        figures = json.loads(out.read_text()) if problem is None else {}
    for figure in FIGURES[name]:
        if figure not in figures:
            figures[figure] = {"value": None, "unit": "", "target": None, "error": problem}
    return figures, time.perf_counter() - began


def compare(figures: dict[str, Any], base: dict[str, dict[str, Any]]) -> None:
    """Adds each figure's ratio to the baseline and whether it regressed, in place."""
    for name, fig in figures.items():
        fig["vs_baseline"] = baseline.ratio(name, fig.get("value"), base.get(name))
        fig["regressed"] = baseline.regressed(name, fig.get("value"), base.get(name))


def main(argv: list[str]) -> int:
    write_baseline = "--write-baseline" in argv
    quick = "--quick" in argv
    argv = [a for a in argv if a not in ("--write-baseline", "--quick")]
    unknown = [a for a in argv if a not in MODULES]
    if unknown:
        print(f"unknown modules: {', '.join(unknown)} (known: {', '.join(MODULES)})")
        return 2
    chosen = [m for m in MODULES if m in argv or (not argv and not (quick and m in LONG_MODULES))]
    began = time.perf_counter()
    started = datetime.now(UTC)
    figures: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    load: dict[str, float] = {}
    for name in chosen:
        # Other work on the machine moves every figure: keep how busy it was alongside.
        load[name] = round(os.getloadavg()[0], 2)
        found, seconds[name] = run_module(name)
        figures.update(found)
    compare(figures, baseline.load())
    results = {
        "date": started.isoformat(timespec="seconds"),
        "machine": machine(),
        "wall_s": round(time.perf_counter() - began, 1),
        "module_wall_s": {k: round(v, 1) for k, v in seconds.items()},
        "module_loadavg_1m_at_start": load,
        "figures": figures,
    }
    print()
    print(table(figures))
    print(f"\n{len(figures)} figures in {results['wall_s']:.0f} s")
    if not argv and not quick:  # a partial run must not pass for the latest full one
        RESULTS.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"written to {RESULTS}")
    if write_baseline:
        kept = baseline.written(figures, results["machine"])
        print(f"baseline: {len(kept)} figures written to {baseline.BASELINE}")
    # A baseline rewritten on purpose moves figures on purpose: only targets and errors fail.
    failing = ("FAIL", "ERROR") if write_baseline else ("FAIL", "ERROR", "WORSE")
    return 1 if any(verdict(f) in failing for f in figures.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
