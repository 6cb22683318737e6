"""The pages: the leaderboards as tiles (`/`) and each ranking's chart as SVG. Everything is
read through the same `Service` as the API, the bot and the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape

from cluster_manager.charts import ChartCache
from cluster_manager.core.records import Leaderboard, RankingEntry
from cluster_manager.report import format_duration_ns, format_time_left
from cluster_manager.service import Service

HERE = Path(__file__).resolve().parent
TOP_PER_GPU = 3
templates = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(), auto_reload=False
)
router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class Leader:
    user: str
    score: str


@dataclass(frozen=True)
class Tile:
    name: str
    summary: str  # the description's first line
    deadline_iso: str
    deadline_text: str
    time_left: str
    submissions: int
    leaders: list[tuple[str, list[Leader]]]  # per GPU, the top three


def static_files() -> StaticFiles:
    return StaticFiles(directory=HERE / "static")


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _tile(
    board: Leaderboard, submissions: int, rankings: dict[str, list[RankingEntry]], now: datetime
) -> Tile:
    description = board.description or board.task.description
    return Tile(
        name=board.name,
        summary=next((line.strip() for line in description.splitlines() if line.strip()), ""),
        deadline_iso=board.deadline.isoformat(),
        deadline_text=board.deadline.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        time_left=format_time_left(board.deadline, now),
        submissions=submissions,
        leaders=[
            (gpu, [Leader(e.user, format_duration_ns(e.score * 1e9)) for e in entries])
            for gpu, entries in rankings.items()
        ],
    )


@router.get("/", response_class=HTMLResponse)
async def home(request: Request) -> HTMLResponse:
    service = _service(request)
    now = service.clock()
    tiles: dict[bool, list[Tile]] = {True: [], False: []}
    for summary in await service.list_leaderboards():
        board = await service.leaderboard(summary.name)
        rankings = await service.ranking(board.name, None, limit=TOP_PER_GPU)
        tiles[board.is_open(now)].append(_tile(board, summary.submissions, rankings, now))
    html = templates.get_template("home.html").render(
        open_tiles=sorted(tiles[True], key=lambda t: t.deadline_iso),
        closed_tiles=sorted(tiles[False], key=lambda t: t.deadline_iso, reverse=True),
    )
    return HTMLResponse(html)


@router.get("/leaderboards/{name}/chart/{gpu}.svg")
async def chart(name: str, gpu: str, request: Request) -> Response:
    """The best score over time on one GPU (cached until the ranking's history changes)."""
    history = await _service(request).score_history(name, gpu)
    charts: ChartCache = request.app.state.charts
    svg = await charts.chart(history, "svg")
    return Response(svg, media_type="image/svg+xml", headers=_revalidate())


def _revalidate() -> dict[str, Any]:
    return {"Cache-Control": "no-cache"}  # cheap to ask again: the server keeps the drawing
