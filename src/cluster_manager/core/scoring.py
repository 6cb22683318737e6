"""From per-benchmark timings to one score (seconds, lower is better)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from cluster_manager.core.models import RankingBy

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
