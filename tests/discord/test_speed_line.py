"""A benchmark case's line in a Discord report carries its speed of light."""

from __future__ import annotations

import dataclasses

from cluster_manager.core.speed_of_light import floor_ns
from cluster_manager.core.task import load_task
from cluster_manager.discord import render
from tests.support.speed_helpers import H100, VECTORADD, ranked_result


def test_a_case_line_shows_bandwidth_flops_and_share_of_peak():
    task = load_task(VECTORADD)
    floors = [floor_ns(task.speed_of_light, case, H100) for case in task.benchmarks]
    result = ranked_result(task, [floor * 4 for floor in floors], H100)
    lines = render._run_lines(result)
    timed = [line for line in lines if line.startswith("⏱️")]
    assert len(timed) == 3
    assert all(" GB/s · " in line and "% of peak (memory)" in line for line in timed), timed
    assert all("25% of peak" in line for line in timed), timed


def test_a_case_without_a_speed_of_light_keeps_its_plain_line():
    task = dataclasses.replace(load_task(VECTORADD), speed_of_light=None)
    result = ranked_result(task, [1000.0, 2000.0, 3000.0], H100)
    timed = [line for line in render._run_lines(result) if line.startswith("⏱️")]
    assert timed and all("GB/s" not in line for line in timed), timed
