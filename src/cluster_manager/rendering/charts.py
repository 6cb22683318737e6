"""Charts of a ranking's history, one module for every front end: SVG for web pages, PNG for
Discord. The fastest score over time is a step line; each of the current top users' best is a
line of its own. matplotlib is imported only when a chart is drawn (the bot's start-up and
memory do not pay for it), through its object API (no pyplot state: drawing in threads is
safe), and a chart is drawn again only when its ranking's history changed."""

from __future__ import annotations

import asyncio
import io
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from cluster_manager.core.records import HistoryKey, ScoreHistory, ScorePoint

if TYPE_CHECKING:  # imported where a chart is drawn, not where this module is
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

Format = Literal["svg", "png"]
# "wide" for a desktop page and Discord; "narrow" is drawn for a phone's width, so that shown
# at about its own size its labels stay as large as the wide chart's on a desktop.
Size = Literal["wide", "narrow"]
FIGURE_INCHES: dict[Size, tuple[float, float]] = {"wide": (8, 4.2), "narrow": (3.75, 4.125)}
NARROW_LABEL = 18  # characters of a user's name in the narrow chart's legend
T = TypeVar("T")
TOP_USERS = 5
CACHE_ENTRIES = 128
# Results closer together than INSTANT are one moment: the axis shows MIN_SPAN before it.
INSTANT = timedelta(seconds=1)
MIN_SPAN = timedelta(minutes=1)
PAD_SHARE = 0.04
_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
# Element ids in the SVG (the pages' tests find the plotted area and the fastest line by them).
PLOT_AREA_ID = "plot-area"
FASTEST_ID = "fastest"


def unit_for(seconds: float) -> tuple[str, float]:
    """The unit the scores read best in: the largest not above the fastest score."""
    return next(((name, scale) for name, scale in _UNITS if seconds >= scale), _UNITS[-1])


def best_over_time(points: tuple[ScorePoint, ...]) -> list[tuple[datetime, float]]:
    """The fastest score after each improvement that beat it."""
    steps: list[tuple[datetime, float]] = []
    for point in points:
        if not steps or point.score < steps[-1][1]:
            steps.append((point.at, point.score))
    return steps


def top_users(points: tuple[ScorePoint, ...], count: int = TOP_USERS) -> list[str]:
    """The users with the best scores now, fastest first (ties: who got there first)."""
    best: dict[str, tuple[float, datetime]] = {}
    for p in points:
        if p.user not in best or p.score < best[p.user][0]:
            best[p.user] = (p.score, p.at)
    return sorted(best, key=lambda user: best[user])[:count]


def draw(
    history: ScoreHistory, fmt: Format, size: Size = "wide", now: datetime | None = None
) -> bytes:
    """The chart; its time axis ends at the newest result, never after `now` (default: the
    clock's now)."""
    from matplotlib.figure import Figure

    narrow = size == "narrow"
    figure = Figure(figsize=FIGURE_INCHES[size], dpi=110, layout="constrained")
    axes = figure.add_subplot()
    axes.patch.set_gid(PLOT_AREA_ID)
    title = "Best score over time" if narrow else f"{history.leaderboard} on {history.gpu}"
    axes.set_title(title if narrow else f"{title}: best score over time")
    points = history.points
    if not points:
        axes.text(0.5, 0.5, "no ranked submissions yet", ha="center", va="center")
        axes.set_axis_off()
        return _render(figure, fmt)
    unit, scale = unit_for(min(p.score for p in points))
    end = max(p.at for p in points)
    fastest = _step_line(
        axes, best_over_time(points), end, scale, color="black", lw=2.2, marker="o", label="fastest"
    )
    fastest.set_gid(FASTEST_ID)
    for user in top_users(points):
        mine = best_over_time(tuple(p for p in points if p.user == user))
        label = legend_label(user, NARROW_LABEL if narrow else None)
        _step_line(axes, mine, end, scale, lw=1.2, alpha=0.85, label=label)
    scores = [p.score for p in points]
    if max(scores) / min(scores) > 20:
        axes.set_yscale("log")
    _time_axis(axes, time_limits(min(p.at for p in points), end, now or datetime.now(UTC)), narrow)
    axes.set_ylabel(f"score ({unit}, lower is better)")
    axes.grid(True, alpha=0.3)
    if narrow:  # below the plot: over it, it would hide the lines
        legend = figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    else:
        legend = axes.legend(loc="upper right", fontsize="small")
    for text in legend.get_texts():  # user names are text: `$...$` is not mathtext here
        text.set_parse_math(False)
    return _render(figure, fmt)


def legend_label(user: str, limit: int | None = None) -> str:
    """A user's name as the legend shows it, cut to `limit` characters: matplotlib leaves out
    labels that start with "_", so such a name gets a zero-width space in front."""
    if limit is not None and len(user) > limit:
        user = user[: limit - 1] + "…"
    return f"\u200b{user}" if user.startswith("_") else user


def time_limits(
    start: datetime, end: datetime, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """The time axis's ends: the results' span with a little room each side, the right one
    never past `now` (nor before the newest result); results within `INSTANT` of each other
    (one result, a burst) get `MIN_SPAN` before them, never time in the future."""
    if end - start < INSTANT:
        start = end - MIN_SPAN
    pad = (end - start) * PAD_SHARE
    high = end + pad if now is None else min(end + pad, max(now, end))
    return start - pad, high


def _time_axis(axes: Axes, limits: tuple[datetime, datetime], narrow: bool) -> None:
    """Dates labelled as briefly as the span allows; fewer of them on a narrow chart."""
    from matplotlib.dates import (
        MINUTELY,
        SECONDLY,
        AutoDateLocator,
        ConciseDateFormatter,
        date2num,
    )

    low, high = limits
    ticks = {"minticks": 3, "maxticks": 5} if narrow else {}
    locator = AutoDateLocator(**ticks)  # type: ignore[no-untyped-call]
    if narrow:  # steps between 1 and 5 (minutes, seconds), or a few ticks fall to one
        for unit in (MINUTELY, SECONDLY):
            locator.intervald[unit] = [1, 2, 3, 5, 10, 15, 20, 30]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    axes.set_xlim(
        float(date2num(low)),  # type: ignore[no-untyped-call]
        float(date2num(high)),  # type: ignore[no-untyped-call]
    )


def _step_line(
    axes: Axes, steps: list[tuple[datetime, float]], end: datetime, scale: float, **style: Any
) -> Line2D:
    """A best-so-far line: flat until the next improvement, drawn on to the newest point."""
    from matplotlib.dates import date2num

    # date2num is untyped in matplotlib 3.11: the one call mypy cannot see into.
    marker = style.pop("marker", None)
    times = [float(date2num(t)) for t, _ in [*steps, (end, 0.0)]]  # type: ignore[no-untyped-call]
    values = [s / scale for _, s in steps] + [steps[-1][1] / scale]
    (line,) = axes.step(times, values, where="post", **style)
    if marker:  # on the improvements only, not on the line's end (the newest result)
        # Unclipped: the newest improvement sits on the axis's right edge.
        axes.plot(
            times[:-1], values[:-1], marker, color=line.get_color(), markersize=4, clip_on=False
        )
    return line


def _render(figure: Figure, fmt: Format) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt)
    return buffer.getvalue()


class ChartCache:
    """What is derived from a ranking's history (its charts, the pages' tables of records),
    kept by the history's key (leaderboard, GPU, version) until the history changes; the
    least recently used go first. A hit reads nothing but the key."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        self._derived: OrderedDict[tuple[HistoryKey, str], object] = OrderedDict()
        self.drawn = 0  # how many times a chart was actually drawn

    async def derived(self, key: HistoryKey, kind: str, make: Callable[[], Awaitable[T]]) -> T:
        slot = (key, kind)
        if slot in self._derived:
            self._derived.move_to_end(slot)
            return cast(T, self._derived[slot])
        made = await make()
        self._derived[slot] = made
        while len(self._derived) > self.entries:
            self._derived.popitem(last=False)
        return made

    async def chart(
        self,
        key: HistoryKey,
        fmt: Format,
        load: Callable[[], Awaitable[ScoreHistory]],
        *,
        size: Size = "wide",
        now: datetime | None = None,
    ) -> bytes:
        """The chart of the history `key` names; `load` reads the history when it must be
        drawn (its time axis ends by `now`, when it is drawn)."""

        async def drawn() -> bytes:
            history = await load()
            self.drawn += 1
            return await asyncio.to_thread(draw, history, fmt, size, now)

        kind = fmt if size == "wide" else f"{fmt}-{size}"
        return await self.derived(key, kind, drawn)
