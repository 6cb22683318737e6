"""Charts of a ranking's history: the fastest over time, the top users' lines, drawn as SVG
and PNG, and drawn again only when the history changed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from cluster_manager.core.records import ScoreHistory, ScorePoint
from cluster_manager.rendering.charts import (
    MIN_SPAN,
    ChartCache,
    best_over_time,
    draw,
    time_limits,
    top_users,
    unit_for,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def point(user: str, score: float, hours: int) -> ScorePoint:
    return ScorePoint(user, score, T0 + timedelta(hours=hours))


POINTS = (
    point("alice", 3e-3, 0),
    point("bob", 2e-3, 1),
    point("alice", 2.5e-3, 2),  # alice improves, but bob is still fastest
    point("carol", 1e-3, 3),
    point("bob", 0.9e-3, 4),
)


def history(points: tuple[ScorePoint, ...] = POINTS, version: int = 5):
    return ScoreHistory("softmax", "H100", points, version)


def test_the_fastest_steps_down_only_when_beaten():
    assert best_over_time(POINTS) == [
        (POINTS[0].at, 3e-3),
        (POINTS[1].at, 2e-3),
        (POINTS[3].at, 1e-3),
        (POINTS[4].at, 0.9e-3),
    ]


def test_top_users_by_their_best_now():
    assert top_users(POINTS) == ["bob", "carol", "alice"]
    assert top_users(POINTS, count=1) == ["bob"]


def test_units_read_from_the_fastest_score():
    assert unit_for(2.5) == ("s", 1.0)
    assert unit_for(0.9e-3) == ("µs", 1e-6)
    assert unit_for(4e-3) == ("ms", 1e-3)
    assert unit_for(1e-12) == ("ns", 1e-9)


def test_svg_and_png_hold_the_lines_and_labels():
    svg = draw(history(), "svg").decode()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for label in ("fastest", "alice", "bob", "carol", "µs, lower is better"):
        assert label in svg, label
    png = draw(history(), "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_any_user_name_is_drawn_as_written():
    """Names are text: mathtext in them made the chart fail (500) or recurse, and a name
    starting with "_" dropped out of the legend."""
    names = [r"$\undefinedmacro$", "$" + r"\sqrt{" * 60 + "x" + "}" * 60 + "$", "_under", "a$b$c"]
    points = tuple(point(name, 1e-3 * (i + 1), i) for i, name in enumerate(names))
    svg = draw(history(points), "svg").decode()
    for name in ("\\undefinedmacro", "_under", "a$b$c"):
        assert name in svg, name
    assert draw(history(points), "png").startswith(b"\x89PNG")


def test_the_time_axis_ends_at_the_newest_result_and_fits_a_short_burst():
    """Ten minutes of results span the axis (they were one vertical line in an hour centred
    on them, half of it in the future); a single result gets `MIN_SPAN` before it."""
    low, high = time_limits(T0, T0 + timedelta(minutes=10))
    assert T0 - timedelta(minutes=1) < low < T0 and T0 + timedelta(minutes=10) < high
    assert high - (T0 + timedelta(minutes=10)) < timedelta(minutes=1)
    low, high = time_limits(T0, T0)
    assert low <= T0 - MIN_SPAN and high - T0 < MIN_SPAN / 10


def test_the_time_axis_never_reaches_past_now_and_fits_seconds():
    """A few seconds of results fill the axis (in five minutes they were a vertical line);
    the axis's right end is never after `now`, nor before the newest result."""
    newest = T0 + timedelta(seconds=4)
    low, high = time_limits(T0, newest, now=newest + timedelta(milliseconds=50))
    assert T0 - timedelta(seconds=1) < low < T0
    assert high == newest + timedelta(milliseconds=50)
    assert time_limits(T0, newest, now=newest - timedelta(hours=1))[1] == newest  # clock skew
    ten = T0 + timedelta(minutes=10)
    assert time_limits(T0, ten, now=ten)[1] == ten
    assert time_limits(T0, ten, now=ten + timedelta(hours=1))[1] - ten < timedelta(minutes=1)


def test_an_empty_history_says_so():
    assert "no ranked submissions yet" in draw(history(()), "svg").decode()


async def test_a_chart_is_drawn_again_only_when_its_history_changed():
    cache = ChartCache()
    loads = []

    def loader(found: ScoreHistory) -> Callable[[], Awaitable[ScoreHistory]]:
        async def load() -> ScoreHistory:
            loads.append(found.version)
            return found

        return load

    now = history()
    first = await cache.chart(now.key, "svg", loader(now))
    assert await cache.chart(now.key, "svg", loader(now)) is first
    assert cache.drawn == 1 and len(loads) == 1  # a hit does not even read the history
    await cache.chart(now.key, "png", loader(now))
    changed = history((*POINTS, point("dave", 0.5e-3, 5)), version=6)
    assert "dave" in (await cache.chart(changed.key, "svg", loader(changed))).decode()
    assert cache.drawn == 3
