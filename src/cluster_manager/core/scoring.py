"""From per-benchmark timings to one score (seconds, lower is better)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from cluster_manager.core.models import RankingBy, Task
from cluster_manager.core.speed_of_light import Peaks, floor_ns

NS_PER_S = 1e9


def floor_review(means_ns: Sequence[float], floors_us: Sequence[float | None]) -> str:
    """Why ranked timings are held for review: a benchmark faster than the task says is
    physically possible (one shape driven to zero collapses a geometric mean). "" if none."""
    for index, (mean, floor) in enumerate(zip(means_ns, floors_us, strict=False)):
        if floor is not None and mean < floor * 1e3:
            return (
                f"held for review: benchmark {index} took {mean / 1e3:.3g} µs, below the "
                f"task's floor of {floor:g} µs"
            )
    return ""


def score_seconds(means_ns: Sequence[float], ranking_by: RankingBy) -> float:
    """`last`: the last benchmark's mean; `mean`: arithmetic mean; `geom`: geometric mean."""
    if not means_ns:
        raise ValueError("no benchmark timings to score")
    if any(not math.isfinite(m) or m <= 0 for m in means_ns):
        raise ValueError(f"benchmark means must be positive and finite, got {list(means_ns)}")
    match ranking_by:
        case RankingBy.LAST:
            value = means_ns[-1]
        case RankingBy.MEAN:
            value = sum(means_ns) / len(means_ns)
        case RankingBy.GEOM:
            value = math.exp(sum(math.log(m) for m in means_ns) / len(means_ns))
    return value / NS_PER_S


def share_of_peak(task: Task, peaks: Peaks | None, score_s: float) -> float | None:
    """A score's fraction of the speed of light on these peaks: the score the cases' floors
    would get by the task's own rule, over the score (`last`: the last case's fraction;
    `mean`: the floors' share of the summed time; `geom`: the geometric mean of the cases'
    fractions). None where the task or the GPU type states nothing to compute it from."""
    if task.speed_of_light is None or peaks is None or not score_s > 0:
        return None
    floors = [floor_ns(task.speed_of_light, case, peaks) for case in task.benchmarks]
    try:
        return score_seconds(floors, task.ranking_by) / score_s
    except ValueError:  # a case with nothing to bound it (no rate for its precision)
        return None
