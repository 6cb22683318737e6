"""The public pages: the leaderboards as tiles (`/`), one leaderboard with its rankings,
charts, task and files, and each ranking's chart as SVG. Everything is read through the same
`Service` as the API, the bot and the CLI."""

from __future__ import annotations

import re
from functools import partial
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.staticfiles import StaticFiles

from cluster_manager.api.auth import signed_in
from cluster_manager.core.models import DEFAULT_SUBMIT_MODE, Mode
from cluster_manager.core.records import Leaderboard
from cluster_manager.core.teams import MAX_TEAM_NAME
from cluster_manager.rendering.charts import ChartCache, Size
from cluster_manager.rendering.reports import format_time_left
from cluster_manager.service import NotFoundError, Submitter
from cluster_manager.web import view_models
from cluster_manager.web.markdown_text import render_markdown
from cluster_manager.web.rendering import (
    HERE,
    BrowserRoute,
    PageRoute,
    keep_private,
    render,
    service_of,
    visible_board,
)
from cluster_manager.web.speed_views import share_text, speed_of_light_view

TOP_PER_GPU = 3
RANKING_ROWS = 100
MY_SUBMISSIONS = 10
router = APIRouter(include_in_schema=False, route_class=PageRoute)
# Shares `/leaderboards/{name}` with the JSON ranking: answers browsers only.
browser_router = APIRouter(include_in_schema=False, route_class=BrowserRoute)


def static_files() -> StaticFiles:
    return StaticFiles(directory=HERE / "static")


@router.get("/")
async def home(request: Request) -> Response:
    service = service_of(request)
    now = service.clock()
    tiles: dict[bool, list[view_models.Tile]] = {True: [], False: []}
    viewer = await signed_in(request)
    user, admin = (None, False) if viewer is None else (viewer.user, viewer.admin)
    for summary in await service.leaderboards.all(user, include_closed=admin):
        board = await service.leaderboards.get(summary.name)
        rankings = await service.leaderboards.ranking(board.name, None, limit=TOP_PER_GPU)
        tiles[board.is_open(now)].append(
            view_models.tile(board, summary.submissions, rankings, now)
        )
    return await render(
        request,
        "home.html",
        open_tiles=sorted(tiles[True], key=lambda t: t.deadline_iso),
        ended_tiles=sorted(tiles[False], key=lambda t: t.deadline_iso, reverse=True),
    )


def page_of(board: Leaderboard) -> str:
    return "/leaderboards/" + quote(board.name, safe="")


def anchor_of(gpu: str) -> str:
    return "gpu-" + re.sub(r"[^A-Za-z0-9_-]", "-", gpu)


@browser_router.get("/leaderboards/{name}")
async def leaderboard(name: str, request: Request, ranking: str = "") -> Response:
    """`ranking=after-deadline`: once the board has ended, the ranking of the runs made after
    its deadline in place of the competition's; ignored before the deadline."""
    return await leaderboard_page(request, name, ranking)


async def leaderboard_page(
    request: Request, name: str, ranking: str = "", invite_code: str = ""
) -> Response:
    """The leaderboard's page; `invite_code`: a team code just made, shown this once."""
    service = service_of(request)
    board = await visible_board(request, name)
    now = service.clock()
    is_open = board.is_open(now)
    after = not is_open and ranking == view_models.AFTER_DEADLINE
    rankings = await service.leaderboards.ranking(
        name, None, limit=RANKING_ROWS, after_deadline=after
    )
    peaks = service.leaderboards.published_peaks(board.gpus)
    of_peak = {gpu: partial(share_text, board.task, peaks.get(gpu)) for gpu in board.gpus}
    sections = [
        view_models.GpuSection(
            gpu,
            anchor_of(gpu),
            view_models.ranking_rows(rankings.get(gpu, []), of_peak[gpu]),
            # The chart is the competition's history, which runs after the deadline never enter.
            [] if after else await records_of(request, board, gpu),
            of_peak=board.task.speed_of_light is not None and gpu in peaks,
        )
        for gpu in board.gpus
    ]
    viewer = await signed_in(request)
    user, admin = (None, False) if viewer is None else (viewer.user, viewer.admin)
    mine = []
    if user is not None:
        found = await service.history.submissions(user, leaderboard=name, limit=MY_SUBMISSIONS)
        mine = [view_models.submission_line(r) for r in found]
    page = await render(
        request,
        "leaderboard.html",
        board=board,
        is_open=is_open,
        takes_submissions=board.takes_submissions(now),
        deadline=view_models.when_text(board.deadline),
        time_left=format_time_left(board.deadline, now),
        description=render_markdown(view_models.description_of(board)),
        ranking_tabs=[] if is_open else view_models.ranking_tabs(page_of(board), after),
        after_deadline=after,
        sections=sections,
        speed_of_light=speed_of_light_view(board.task, board.gpus, peaks),
        templates=sorted(board.task.templates),
        files=sorted(f.name for f in board.task.files if f.content is not None),
        mine=mine,
        modes=[m.value for m in Mode],
        default_mode=DEFAULT_SUBMIT_MODE.value,  # a ranked run only when chosen
        **await teams_section(request, name, user, admin),
        max_team_name=MAX_TEAM_NAME,
        invite_code=invite_code,
    )
    if invite_code or viewer is not None:  # a code shown once; the viewer's own submissions
        keep_private(page)
    return page


async def teams_section(
    request: Request, name: str, user: Submitter | None, admin: bool
) -> dict[str, Any]:
    """How many teams there are and the viewer's own: all of them are on their own page (a
    season's hundreds would outweigh the rankings)."""
    service = service_of(request)
    count = await service.teams.count(name, user, include_closed=admin)
    mine = None if user is None or not count else await service.teams.of_user(name, user)
    return {
        "team_count": count,
        "my_team": None if mine is None else view_models.team_view(mine, user),
    }


async def records_of(request: Request, board: Leaderboard, gpu: str) -> list[view_models.RecordRow]:
    """The chart's data as a table, kept with the chart until the history changes."""
    service = service_of(request)
    charts: ChartCache = request.app.state.charts

    async def records() -> list[view_models.RecordRow]:
        return view_models.record_rows(await service.leaderboards.score_history(board.name, gpu))

    return await charts.derived(
        await service.leaderboards.history_key(board, gpu), "records", records
    )


@router.get("/leaderboards/{name}/chart/{gpu}.svg")
async def chart(name: str, gpu: str, request: Request, size: Size = "wide") -> Response:
    """The best score over time on one GPU (cached until the ranking's history changes);
    `size=narrow` is drawn for a phone's width, its labels as large as the wide one's."""
    service = service_of(request)
    charts: ChartCache = request.app.state.charts
    key = await service.leaderboards.history_key(await visible_board(request, name), gpu)
    svg = await charts.chart(
        key,
        "svg",
        lambda: service.leaderboards.score_history(name, gpu),
        size=size,
        now=service.clock(),
    )
    # Cheap to ask again: the server keeps the drawing until the history changes.
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-cache"})


@router.get("/leaderboards/{name}/files/{file_name:path}")
async def task_file(name: str, file_name: str, request: Request) -> Response:
    """One of the task's readable files, to download."""
    await visible_board(request, name)
    files = await service_of(request).leaderboards.task_files(name)
    if file_name not in files:
        raise NotFoundError(f"{name!r} has no file {file_name!r}")
    download = file_name.rsplit("/", 1)[-1]
    return Response(
        files[file_name],
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{_safe(download)}"'},
    )


def _safe(file_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", file_name) or "file"
