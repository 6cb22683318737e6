"""What popcorn-cli calls, with the shapes it parses (github.com/gpu-mode/popcorn-cli,
src/service/mod.rs): listing leaderboards and GPUs, submitting (answered at once, then
polled; or streamed as server-sent events), reading and deleting one's submissions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request, Response

from cluster_manager.api.auth import Caller, Private, caller, optional_caller
from cluster_manager.api.error_handlers import BadRequestError
from cluster_manager.api.models.answers import Detail, Joined, SubmissionDone
from cluster_manager.api.models.leaderboards import LeaderboardListed
from cluster_manager.api.models.submissions import (
    SubmissionSummary,
    SubmissionView,
    SubmitAccepted,
)
from cluster_manager.api.streams import SUBMISSION_EVENTS, event_response, submission_stream
from cluster_manager.api.uploads import read_upload
from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import (
    FORM_FIELDS,
    InvalidProfileOptions,
    ProfileOptions,
    chosen_options,
)
from cluster_manager.core.records import JobState, Leaderboard
from cluster_manager.service import Service, SubmissionReceipt

router = APIRouter()
Authenticated = Annotated[Caller, Depends(caller)]
Viewer = Annotated[Caller | None, Depends(optional_caller)]

REGISTER_HINT = (
    "this server does not take popcorn-cli's `register` (its OAuth callback goes to the server "
    "the client was built for). Get a token with /token in Discord (or from an admin: "
    "cluster-manager user token NAME), write `cli_id: <token>` into ~/.popcorn.yaml and set "
    "POPCORN_API_URL to this server's URL."
)


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def visible_board(request: Request, name: str, who: Caller | None) -> Leaderboard:
    """The leaderboard, if the caller may see it; else 404 as for a missing one."""
    user, admin = (None, False) if who is None else (who.user, who.admin)
    return await service_of(request).leaderboards.visible(name, user, include_closed=admin)


def parse_mode(raw: str) -> Mode:
    try:
        return Mode(raw.lower())
    except ValueError:
        modes = ", ".join(m.value for m in Mode)
        raise BadRequestError(f"unknown mode {raw!r}; choose from {modes}") from None


@router.get("/auth/init", status_code=501)
async def auth_init() -> Detail:
    """popcorn-cli's `register`, which this server does not take: how to get a token."""
    return Detail(detail=REGISTER_HINT)


@router.get("/leaderboards")
async def leaderboards(request: Request, who: Viewer) -> list[LeaderboardListed]:
    """Open leaderboards, and the invite-only ones the caller joined (all for the admin)."""
    service = service_of(request)
    user, admin = (None, False) if who is None else (who.user, who.admin)
    summaries = await service.leaderboards.all(user, include_closed=admin)
    return [
        LeaderboardListed.listed(await service.leaderboards.get(s.name), s.submissions)
        for s in summaries
    ]


@router.get("/gpus/{leaderboard}")
async def gpus(leaderboard: str, request: Request, who: Viewer) -> list[str]:
    return list((await visible_board(request, leaderboard, who)).gpus)


async def _submit(
    request: Request, who: Caller, leaderboard: str, gpu: str, mode: str
) -> SubmissionReceipt:
    service = service_of(request)
    user = who.require_user()
    chosen = parse_mode(mode)
    # An unknown board, or one hidden from the caller, is 404 before the upload is read.
    await visible_board(request, leaderboard, who)
    upload = await read_upload(request, service.submissions.max_bytes)
    return await service.submissions.submit(
        leaderboard,
        user,
        upload.file_name,
        upload.data,
        gpus=[gpu],
        mode=chosen,
        profile_benchmark=benchmark_index(upload.fields) if chosen is Mode.PROFILE else None,
        profile=ncu_filter(upload.fields),
    )


NCU_NUMBERS = ("ncu_launch_skip", "ncu_launch_count")


def benchmark_index(fields: dict[str, str]) -> int | None:
    """The benchmark case a profile asks for (`benchmark_index`), if any."""
    raw = fields.get("benchmark_index", "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise BadRequestError(f"benchmark_index must be a whole number from 0, got {raw!r}")
    return int(raw)


def ncu_filter(fields: dict[str, str]) -> ProfileOptions | None:
    """Nsight Compute's filter from the `ncu_*` fields (core.profiling.FORM_FIELDS), or None
    when none is given. Read in every mode: the service refuses a filter outside profile mode
    rather than drop it."""
    given = {name: raw for name in FORM_FIELDS if (raw := fields.get(name, "").strip())}
    numbers = {name: _whole_number(name, given[name]) for name in NCU_NUMBERS if name in given}
    try:
        return chosen_options(
            kernel_name=given.get("ncu_kernel_name"),
            kernel_name_base=given.get("ncu_kernel_name_base"),
            launch_skip=numbers.get("ncu_launch_skip"),
            launch_count=numbers.get("ncu_launch_count"),
        )
    except InvalidProfileOptions as exc:
        field = next(name for name, option in FORM_FIELDS.items() if option == exc.option)
        raise BadRequestError(f"{field}: {exc}") from None


def _whole_number(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise BadRequestError(f"{name} must be a whole number, got {raw!r}") from None


@router.post("/submission/{leaderboard}/{gpu}/{mode}", status_code=202)
async def submit(
    leaderboard: str, gpu: str, mode: str, request: Request, who: Authenticated
) -> SubmitAccepted:
    """Accepted at once; the client polls `GET /user/submissions/{id}`."""
    receipt = await _submit(request, who, leaderboard, gpu, mode)
    queue = await service_of(request).queues.status(receipt.jobs[0].gpu)
    return SubmitAccepted.of(receipt, queue)


@router.post("/user/join")
async def join(
    request: Request, who: Authenticated, code: Annotated[str, Body(embed=True)]
) -> Joined:
    """Redeems an invite code: the caller becomes a member of its invite-only leaderboard."""
    board, joined = await service_of(request).invites.join(code, who.require_user())
    return Joined(leaderboard=board, status="joined" if joined else "already a member")


@router.get("/user/submissions", dependencies=[Private])
async def my_submissions(
    request: Request,
    who: Authenticated,
    leaderboard: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> list[SubmissionSummary]:
    service = service_of(request)
    if leaderboard is not None:
        await visible_board(request, leaderboard, who)
    reports = await service.history.submissions(
        who.require_user(), leaderboard=leaderboard, limit=limit
    )
    return [
        SubmissionSummary.of(r, await service.submissions.ranking_holds(r.submission.id))
        for r in reports
    ]


@router.get("/user/submissions/{submission_id}", dependencies=[Private])
async def my_submission(submission_id: int, request: Request, who: Authenticated) -> SubmissionView:
    return await submission_answer(service_of(request), submission_id, who)


async def submission_answer(service: Service, submission_id: int, who: Caller) -> SubmissionView:
    """A submission with its runs, job state, queue and placements (owner or admin)."""
    report = await service.history.own_report(submission_id, who.user, admin=who.admin)
    waiting = next((j for j in report.jobs if j.state is JobState.QUEUED), None)
    queue = await service.queues.status(waiting.gpu) if waiting else None
    holds = await service.submissions.ranking_holds(submission_id)
    placements = None
    if report.done and report.submission.mode is Mode.LEADERBOARD:
        placements = await service.submissions.placements(submission_id)
    return SubmissionView.of(report, queue, holds, placements)


@router.delete("/user/submissions/{submission_id}")
async def delete_my_submission(
    submission_id: int, request: Request, who: Authenticated
) -> SubmissionDone:
    await service_of(request).history.delete(submission_id, who.user, admin=who.admin)
    return SubmissionDone(status="deleted", id=submission_id)


@router.post("/profile/{leaderboard}/{gpu}", response_class=Response, responses=SUBMISSION_EVENTS)
async def profile(leaderboard: str, gpu: str, request: Request, who: Authenticated) -> Response:
    request.app.state.streams.check(who.key)  # before anything is submitted
    receipt = await _submit(request, who, leaderboard, gpu, Mode.PROFILE.value)
    return _stream(request, who, receipt)


@router.post("/{leaderboard}/{gpu}/{mode}", response_class=Response, responses=SUBMISSION_EVENTS)
async def submit_streaming(
    leaderboard: str, gpu: str, mode: str, request: Request, who: Authenticated
) -> Response:
    """The streaming form: progress as `status` events, then `result` (or `error`)."""
    request.app.state.streams.check(who.key)  # before anything is submitted
    receipt = await _submit(request, who, leaderboard, gpu, mode)
    return _stream(request, who, receipt)


def _stream(request: Request, who: Caller, receipt: SubmissionReceipt) -> Response:
    interval = request.app.state.status_interval_s
    events = submission_stream(service_of(request), receipt.submission_id, interval_s=interval)
    return event_response(request.app.state.streams.counted(who.key, events))
