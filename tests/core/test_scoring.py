"""Scores from benchmark means: nanoseconds in, seconds out."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster_manager.core.models import RankingBy
from cluster_manager.core.scoring import NS_PER_S, score_seconds


def test_ns_per_s() -> None:
    assert NS_PER_S == 1e9


@pytest.mark.parametrize(
    ("ranking", "means", "expected"),
    [
        (RankingBy.LAST, [1e9, 2e9, 3e9], 3.0),
        (RankingBy.LAST, [5e9, 1e3], 1e-6),
        (RankingBy.MEAN, [1e9, 2e9, 3e9], 2.0),
        (RankingBy.MEAN, [1000.0, 3000.0], 2e-6),
        (RankingBy.GEOM, [1e9, 4e9], 2.0),
        (RankingBy.GEOM, [1e3, 1e5, 1e7], 1e-4),
        (RankingBy.GEOM, [2500.0], 2.5e-6),
    ],
)
def test_known_scores(ranking: RankingBy, means: list[float], expected: float) -> None:
    assert score_seconds(means, ranking) == pytest.approx(expected, rel=1e-12)


def test_ranking_by_accepts_plain_string_enum_values() -> None:
    assert score_seconds([1e9, 3e9], RankingBy("mean")) == pytest.approx(2.0)


def test_tuple_input() -> None:
    assert score_seconds((4e9, 1e9), RankingBy.LAST) == pytest.approx(1.0)


@pytest.mark.parametrize("ranking", list(RankingBy))
def test_empty_is_rejected(ranking: RankingBy) -> None:
    with pytest.raises(ValueError, match="no benchmark timings"):
        score_seconds([], ranking)


@pytest.mark.parametrize("ranking", list(RankingBy))
@pytest.mark.parametrize("bad", [0.0, -1.0, -1e9, math.nan, math.inf, -math.inf])
def test_non_positive_or_non_finite_is_rejected(ranking: RankingBy, bad: float) -> None:
    # A bad value anywhere is refused, even where `last` would not look at it.
    with pytest.raises(ValueError, match="positive and finite"):
        score_seconds([bad, 1e9], ranking)
    with pytest.raises(ValueError, match="positive and finite"):
        score_seconds([1e9, bad], ranking)


means = st.lists(st.floats(min_value=1.0, max_value=1e13), min_size=1, max_size=20)


@given(means)
def test_geom_between_min_and_max_and_not_above_mean(values: list[float]) -> None:
    geom = score_seconds(values, RankingBy.GEOM)
    mean = score_seconds(values, RankingBy.MEAN)
    lo, hi = min(values) / NS_PER_S, max(values) / NS_PER_S
    assert lo * (1 - 1e-9) <= geom <= hi * (1 + 1e-9)
    assert lo * (1 - 1e-9) <= mean <= hi * (1 + 1e-9)
    assert geom <= mean * (1 + 1e-9)


@given(means)
def test_last_is_last(values: list[float]) -> None:
    assert score_seconds(values, RankingBy.LAST) == values[-1] / NS_PER_S


@given(st.floats(min_value=1.0, max_value=1e13), st.integers(min_value=1, max_value=10))
def test_constant_inputs_agree(value: float, count: int) -> None:
    scores = {r: score_seconds([value] * count, r) for r in RankingBy}
    for score in scores.values():
        assert score == pytest.approx(value / NS_PER_S, rel=1e-9)
