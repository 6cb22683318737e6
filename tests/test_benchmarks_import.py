"""Every benchmark module imports, and the cheap ones run on a tiny input: a helper renamed in
the code or the test suite breaks this, not the next `make bench` (issue 43: `workflow_setup`
had imported a driver function that no longer existed, unnoticed for days).

The full runs are `make bench`'s; here each runs in seconds or only its cheapest entry point
(a served API is started once, by the streams check).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster_manager.core.task import load_task

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

# A script beside the benchmarks, found through the path above (not a package to import).
run = importlib.import_module("run")

# Every script and helper beside run.py, those it does not run included.
ALL = sorted(path.stem for path in BENCHMARKS.glob("*.py"))


def test_run_py_runs_modules_that_exist():
    assert set(run.MODULES) <= set(ALL) and set(run.FIGURES) == set(run.MODULES)


@pytest.mark.parametrize("name", ALL)
def test_every_benchmark_module_imports(name: str):
    module = importlib.import_module(name)
    if name in run.MODULES:
        assert callable(module.main)
        assert run.FIGURES[name], "run.py knows what the module reports"


def test_the_ranking_benchmark_runs_on_a_tiny_season(fresh_db_url: str):
    ranking = importlib.import_module("ranking")
    (found,) = asyncio.run(ranking.run(fresh_db_url, ranking.TINY))  # the service's, unserved
    assert found.name == "ranking_p95_ms" and found.error is None and found.value is not None
    assert found.details["rows_shown"] > 0
    rows = found.details["rows"]
    assert rows["submissions"] == ranking.TINY.submissions
    assert rows["rankings_after_deadline"] > 0 and rows["team_members"] > 0


def test_the_metrics_benchmark_reads_the_totals_of_a_small_history(fresh_db_url: str):
    metrics_scrape = importlib.import_module("metrics_scrape")
    found = asyncio.run(metrics_scrape.run(fresh_db_url, metrics_scrape.TINY))
    assert found.error is None and found.value is not None and found.value > 0
    # Every inserted job counted, by migration 0023 run again over them.
    assert found.details["ended_jobs"] == metrics_scrape.TINY.jobs


def test_the_streams_benchmark_holds_streams_of_several_users(
    fresh_db_url: str, monkeypatch: pytest.MonkeyPatch
):
    api_streams = importlib.import_module("api_streams")
    monkeypatch.setattr(api_streams, "SAMPLES", 1)
    monkeypatch.setattr(api_streams, "WARM_UP", 1)
    # More streams than one token may hold: each user's own token keeps them within the cap.
    queued = asyncio.run(api_streams.queue_submissions(fresh_db_url, streams=10))
    assert len({token for _, token in queued}) == 10
    figures = asyncio.run(api_streams.measure(fresh_db_url, queued, calls=2, settle_s=0))
    assert [f.error for f in figures] == [None, None]
    assert figures[0].details["streams"] == 10


def test_the_transfer_and_the_pipe_floor_run_on_a_small_buffer(monkeypatch: pytest.MonkeyPatch):
    case_transfer = importlib.import_module("case_transfer")
    monkeypatch.setattr(case_transfer, "SIZE", 1 << 16)
    monkeypatch.setattr(case_transfer, "SHAPE", (2, 8192))
    monkeypatch.setattr(case_transfer, "CALLS", 3)
    monkeypatch.setattr(case_transfer, "WAIT_NS", 1e4)
    assert case_transfer.raw_pipe().value is not None
    moved = case_transfer.case_transfer()
    assert moved.error is None and moved.value is not None and moved.value > 0


def test_the_fleet_plan_and_its_ideal_waits():
    fleet = importlib.import_module("fleet")
    arrivals = fleet.plan(random.Random(1))
    waits = fleet.ideal_waits(arrivals, random.Random(2))
    assert arrivals and len(waits) >= len(arrivals) and min(waits) >= 0


def test_the_timing_benchmarks_helpers(tmp_path: Path):
    timing_error = importlib.import_module("timing_error")
    eval_overhead = importlib.import_module("eval_overhead")
    (tmp_path / "eval").mkdir()
    assert (tmp_path / "eval" / eval_overhead.materialise(tmp_path / "eval")).is_file()
    (tmp_path / "busy").mkdir()
    task = load_task(timing_error.write_task(tmp_path / "busy"))
    assert [b["micros"] for b in task.benchmarks] == list(timing_error.DURATIONS_US)
    assert timing_error.error_pct(101_000, 100) == pytest.approx(1.0)


def figure(value: float | None, target: float | None = None) -> dict[str, Any]:
    return {"value": value, "unit": "ms", "target": target, "pass": None, "error": None}


def test_a_figure_a_third_worse_than_its_baseline_fails_the_bench(tmp_path: Path):
    baseline = importlib.import_module("baseline")
    benchlib = importlib.import_module("benchlib")
    path = tmp_path / "baseline.json"
    measured = {
        "ranking_p95_ms": figure(2.0),
        "fleet_throughput_per_min": figure(26.0),
        "queue_overhead_ms_per_job": figure(1.2),
        "kernel_alone_spread": figure(1.3),
        "api_p95_ms": {**figure(None), "error": "it crashed"},
    }
    assert baseline.written(measured, {"nproc": 2}, path) == [
        "ranking_p95_ms",
        "fleet_throughput_per_min",
        "queue_overhead_ms_per_job",
        "kernel_alone_spread",
    ]
    base = baseline.load(path)
    assert "api_p95_ms" not in base and json.loads(path.read_text())["machine"] == {"nproc": 2}
    now = {
        "ranking_p95_ms": figure(3.5),  # 1.75x and 1.5 ms worse: beyond its noise
        "fleet_throughput_per_min": figure(18.0),  # higher is better: below 3/4 of 26
        "queue_overhead_ms_per_job": figure(2.9),  # 2.4x, but within this VM's 2 ms of noise
        "kernel_alone_spread": figure(9.0),  # the machine's, never compared
    }
    run.compare(now, base)
    assert {n: f["regressed"] for n, f in now.items()} == {
        "ranking_p95_ms": True,
        "fleet_throughput_per_min": True,
        "queue_overhead_ms_per_job": False,
        "kernel_alone_spread": False,
    }
    assert now["ranking_p95_ms"]["vs_baseline"] == pytest.approx(1.75)
    assert now["kernel_alone_spread"]["vs_baseline"] is None
    text = benchlib.table(now)
    assert "vs base" in text and "1.75x" in text and "WORSE" in text
    fleet = base["fleet_throughput_per_min"]  # 26: a third worse is below 19.5
    assert baseline.regressed("fleet_throughput_per_min", 19.0, fleet)
    assert not baseline.regressed("fleet_throughput_per_min", 20.0, fleet)


def test_the_committed_baseline_covers_every_figure():
    """A new figure gets its baseline: `benchmarks/run.py --write-baseline MODULE`."""
    baseline = importlib.import_module("baseline")
    names = {name for figures in run.FIGURES.values() for name in figures}
    assert set(baseline.load()) == names
