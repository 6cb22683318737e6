"""The speed of light in the text report (`eval`, `submit`, the bot's log and the pages'
Report): a table of the timed cases' achieved rates and share of peak, then the peaks."""

from __future__ import annotations

import dataclasses

from cluster_manager.core.speed_of_light import floor_ns
from cluster_manager.core.task import load_task
from cluster_manager.rendering.reports import format_report
from cluster_manager.rendering.speed import si_text, speed_summary
from tests.support.speed_helpers import H100, VECTORADD, ranked_result


def test_the_report_has_a_speed_of_light_table_under_the_timings():
    task = load_task(VECTORADD)
    means = [floor_ns(task.speed_of_light, case, H100) * 4 for case in task.benchmarks]
    report = format_report(ranked_result(task, means, H100), title="vectoradd")
    table = report.split("Speed of light (leaderboard phase)\n")[1].split("\n\n")[0]
    assert table.splitlines() == [
        "  case                    bandwidth  FLOP rate (fp16)  of peak",
        "  size: 256; seed: 54352  838 GB/s   140 GFLOP/s       25% memory",
        "  size: 512; seed: 93246  838 GB/s   140 GFLOP/s       25% memory",
        "  size: 1024; seed: 6256  838 GB/s   140 GFLOP/s       25% memory",
        "  peaks (the GPU type's published): 3.35 TB/s, fp16 989 TFLOP/s",
    ]
    # The bot's one line per case.
    first = ranked_result(task, means, H100).benchmarks[0].speed
    assert first is not None
    assert speed_summary(first) == "838 GB/s · 140 GFLOP/s fp16 · 25% of peak (memory)"


def test_a_case_over_peak_is_reported_held_and_long_names_get_their_own_line():
    task = load_task(VECTORADD)
    long = tuple({**case, "a_parameter_with_a_long_name": 1} for case in task.benchmarks)
    task = dataclasses.replace(task, benchmarks=long)
    means = [floor_ns(task.speed_of_light, case, H100) / 2 for case in task.benchmarks]
    report = format_report(ranked_result(task, means, H100))
    lines = report.split("Speed of light (leaderboard phase)\n")[1].splitlines()
    assert lines[0] == "  case"
    assert lines[2].startswith("  size: 256; seed: 54352; a_parameter_with_a_long_name: 1")
    assert lines[3].split() == ["6.7", "TB/s", "1.12", "TFLOP/s", "200.0%", "memory"]
    assert all(len(line) <= 80 for line in lines[:8])  # the table, in a terminal's width
    assert "⚠️ held for review: benchmark 0 ran at 200% of the GPU's peak memory" in report


def test_a_run_without_figures_has_no_table():
    task = dataclasses.replace(load_task(VECTORADD), speed_of_light=None)
    report = format_report(ranked_result(task, [1000.0, 2000.0, 3000.0], H100))
    assert "Speed of light" not in report


def test_rates_take_the_largest_prefix_that_fits():
    assert si_text(3.35e12, "B/s") == "3.35 TB/s"
    assert si_text(999.96e9, "B/s") == "1 TB/s"
    assert si_text(512, "B") == "512 B"
    assert si_text(6.5e4, "FLOP") == "65 kFLOP"
