"""Our own endpoints: rankings, task files and templates, the queue, live job events, health."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import PlainTextResponse

from cluster_manager.api.auth import Caller, caller, optional_caller
from cluster_manager.api.models.answers import Health, QueuesView, media_answer
from cluster_manager.api.models.leaderboards import RankingView, TaskFiles
from cluster_manager.api.routes.popcorn import Viewer, service_of, visible_board
from cluster_manager.api.streams import event_response, event_stream, streamed
from cluster_manager.core.task import find_template, no_template
from cluster_manager.service import NotFoundError

router = APIRouter()
Authenticated = Annotated[Caller, Depends(caller)]


@router.get("/health")
async def health(request: Request) -> Health:
    """The database's round trip, and the GPU types a live scheduler runs: a type a
    leaderboard lists but missing here has its jobs failed after a minute in the queue."""
    service = service_of(request)
    return Health(
        database_ms=round(await service.monitoring.database_ms(), 2),
        served_gpus=await service.monitoring.served_gpus(),
    )


@router.get("/leaderboards/{name}")
async def leaderboard(
    name: str,
    request: Request,
    who: Viewer,
    gpu: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after_deadline: bool = False,
) -> RankingView:
    """The competition's ranking per GPU; with `after_deadline`, that of the runs made after
    the deadline instead."""
    board = await visible_board(request, name, who)
    service = service_of(request)
    rankings = await service.leaderboards.ranking(
        name, gpu, limit=limit, after_deadline=after_deadline
    )
    peaks = service.leaderboards.published_peaks(board.gpus)
    return RankingView.ranked(board, rankings, peaks, after_deadline=after_deadline)


@router.get("/leaderboards/{name}/task")
async def task(name: str, request: Request, who: Viewer) -> TaskFiles:
    board = await visible_board(request, name, who)
    return TaskFiles.of(board.task, await service_of(request).leaderboards.task_files(name))


TEMPLATE = media_answer("text/plain", "The task's template for the language, as text")


@router.get(
    "/leaderboards/{name}/template/{language}",
    response_class=PlainTextResponse,
    responses=TEMPLATE,
)
async def template(name: str, language: str, request: Request, who: Viewer) -> PlainTextResponse:
    await visible_board(request, name, who)
    templates = await service_of(request).leaderboards.templates(name)
    found = find_template(templates, language)
    if found is None:
        raise NotFoundError(no_template(name, language, templates))
    return PlainTextResponse(found)


@router.get("/queue")
async def queue(
    request: Request, who: Annotated[Caller | None, Depends(optional_caller)]
) -> QueuesView:
    """Per GPU type, jobs queued and running; with a user's token, their own open jobs and
    their places in line."""
    user = None if who is None else who.user
    return QueuesView.of(await service_of(request).queues.view(user))


JOB_EVENTS = streamed(
    "`job` for each change of one of its jobs (`core.records.JobEvent`), then `done` "
    "(`status`, `error`, `runs`)"
)


@router.get("/submissions/{submission_id}/events", response_class=Response, responses=JOB_EVENTS)
async def events(submission_id: int, request: Request, who: Authenticated) -> Response:
    service = service_of(request)
    await service.history.own_report(submission_id, who.user, admin=who.admin)
    streams = request.app.state.streams
    return event_response(streams.counted(who.key, event_stream(service, submission_id)))
