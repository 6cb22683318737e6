"""Every refusal as `{"detail": "..."}` with the status that says what kind it is. An
unexpected error is logged with a short id and answered 500 with that id, never a trace."""

from __future__ import annotations

import logging
import math
import re
import uuid

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from cluster_manager.core.errors import (
    ClusterManagerError,
    InvalidCompetitionError,
    InvalidSubmissionError,
    InvalidTaskError,
    LauncherError,
)
from cluster_manager.core.gpus import UnknownGpuError
from cluster_manager.core.profiling import InvalidProfileOptions
from cluster_manager.core.records import InvalidNameError
from cluster_manager.service import (
    AlreadyExistsError,
    AlreadyInTeamError,
    BannedError,
    DeadlinePassedError,
    GpuBusyError,
    GpuNotAllowedError,
    GpuNotServedError,
    InvalidChannelPolicyError,
    InvalidDeadlineError,
    InvalidInviteError,
    InvalidMintError,
    InvalidQuotaError,
    InvalidTeamSizeError,
    MissingReasonError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    StillRunningError,
    SubmissionsPausedError,
    TeamError,
    TeamFullError,
    UnauthorizedError,
    UnknownUserError,
)
from cluster_manager.service.errors import (
    DatabaseError,
    DatabaseUnavailableError,
    DatabaseUnreachableError,
    UnknownTeamCodeError,
)

log = logging.getLogger(__name__)


class UploadTooLargeError(ClusterManagerError):
    """A request body or uploaded file over its limit."""


class BadRequestError(ClusterManagerError):
    """A request that is not what the endpoint takes (a malformed multipart body, say)."""


# The status of each of our errors; the most specific class in an error's MRO decides.
# tests/test_error_tables.py holds every error class to a row here or a line of AS_THEIR_BASE.
STATUS_OF: dict[type[ClusterManagerError], int] = {
    ClusterManagerError: 400,  # a refusal of no more specific kind: the request's fault
    # Who asks, and what they may do.
    UnauthorizedError: 401,  # no token, or one that names nobody
    PermissionDeniedError: 403,
    BannedError: 403,
    DeadlinePassedError: 403,  # the leaderboard takes nothing more of the kind asked
    # What the request names.
    NotFoundError: 404,
    UnknownUserError: 404,
    InvalidInviteError: 404,  # unknown, revoked or used up: no code to redeem, as for a team's
    UnknownTeamCodeError: 404,
    AlreadyExistsError: 409,
    AlreadyInTeamError: 409,
    TeamFullError: 409,
    TeamError: 409,  # the user's team standing (in no team, every code held) forbids it now
    StillRunningError: 409,  # asked again once the submission's jobs are done, it works
    GpuNotServedError: 409,  # the deployment runs no such GPU (yet): a setting is missing
    # Values the request holds that the service refuses.
    GpuNotAllowedError: 400,
    UnknownGpuError: 400,
    InvalidNameError: 400,
    InvalidDeadlineError: 400,
    InvalidQuotaError: 400,
    InvalidChannelPolicyError: 400,
    InvalidMintError: 400,
    InvalidTeamSizeError: 400,
    InvalidProfileOptions: 400,
    MissingReasonError: 400,
    BadRequestError: 400,
    # What the request uploads.
    UploadTooLargeError: 413,
    InvalidSubmissionError: 422,  # the file is read, but cannot run as it is
    InvalidTaskError: 400,  # an uploaded task or problem set that cannot be used
    InvalidCompetitionError: 400,
    # Try again later.
    RateLimitedError: 429,  # with Retry-After
    SubmissionsPausedError: 503,  # organisers paused submissions; the reason says why
    GpuBusyError: 503,  # every slot of the GPU type stayed taken
    LauncherError: 502,  # the runners behind this server failed to take or answer the run
    # Ours, not the caller's to fix: HIDDEN, logged with an id that the answer gives.
    DatabaseError: 500,
    DatabaseUnavailableError: 503,  # the connection dropped; the pool makes a new one
    DatabaseUnreachableError: 503,
}
# Ours whose text may describe the deployment (hosts, addresses): logged with a short id, and
# the answer gives the id only.
HIDDEN: tuple[type[ClusterManagerError], ...] = (DatabaseError,)
# Ours answered with their nearest base's row, by why they need no row of their own: by name,
# since most belong to parts this one may not import.
AS_THEIR_BASE: dict[str, tuple[str, ...]] = {
    "a launcher's own failure (GitHub's answers, a run past its time), as any launcher's": (
        "RunTimedOutError",
        "GitHubRateLimitedError",
        "HttpError",
        "TransientError",
        "RateLimitError",
    ),
    "a backup's or a restore's (`cluster-manager db`), never in a request": (
        "PgToolError",
        "BackupError",
    ),
    "raised while a process starts (its GPU registry, its role), before any request": (
        "InvalidRegistryError",
        "AlreadyRunningError",
    ),
    "the CLI's own, about the answers of a server": ("ApiError", "NotOverTheApiError"),
    "the Discord bot's own, about its commands and attachments": (
        "AttachmentError",
        "FileTooLargeError",
        "WrongFileTypeError",
        "UsageError",
    ),
}


def status_of(exc: ClusterManagerError) -> int:
    return next(STATUS_OF[kind] for kind in type(exc).__mro__ if kind in STATUS_OF)


def answer_of(request: Request, exc: ClusterManagerError) -> tuple[int, str]:
    """The status and the detail to send for one of our errors: its own text, or for a
    HIDDEN one an id under which it is logged."""
    status = status_of(exc)
    if isinstance(exc, HIDDEN):
        return status, _logged(request, exc, status)
    return status, str(exc)


def detail(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


async def _ours(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ClusterManagerError)
    status, message = answer_of(request, exc)
    headers = None
    if isinstance(exc, RateLimitedError):
        headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after.total_seconds())))}
    if isinstance(exc, UnauthorizedError):
        headers = {"WWW-Authenticate": "Bearer"}
    return detail(status, message, headers)


async def _invalid(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p not in {"path", "query", "body"})
        problems.append(f"{where}: {error.get('msg', 'invalid')}" if where else error["msg"])
    return detail(422, "; ".join(problems) or "invalid request")


async def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    return detail(exc.status_code, str(exc.detail), dict(exc.headers or {}))


_OUT_OF_RANGE = re.compile(r": (-?\d+) \(value out of int(32|64) range\)")


async def _unstorable(_request: Request, exc: Exception) -> JSONResponse:
    """A value Postgres cannot hold (a number beyond its column, a NUL in text): the request's
    fault, refused before anything was written (the statement failed as a whole)."""
    assert isinstance(exc, asyncpg.exceptions.DataError)
    if isinstance(exc, asyncpg.exceptions.CharacterNotInRepertoireError):
        return detail(400, "text in the request holds a NUL character, which no field may hold")
    if found := _OUT_OF_RANGE.search(str(exc)):
        most = 2 ** (int(found[2]) - 1) - 1
        return detail(400, f"{found[1]} is out of range: the most this field holds is {most}")
    return detail(400, "a value in the request cannot be stored as it is")


def _logged(request: Request, exc: BaseException, status: int) -> str:
    """Logs the error with a short id; the detail that gives the id."""
    error_id = uuid.uuid4().hex[:8]
    log.error("error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc)
    if status == 503:
        return f"the service is unavailable for a moment (id {error_id}); try again soon"
    return f"internal error (id {error_id}); it has been logged"


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    return detail(500, _logged(request, exc, 500))


def install(api: FastAPI) -> None:
    api.add_exception_handler(ClusterManagerError, _ours)
    api.add_exception_handler(RequestValidationError, _invalid)
    api.add_exception_handler(HTTPException, _http)
    api.add_exception_handler(asyncpg.exceptions.DataError, _unstorable)
    api.add_exception_handler(Exception, _unexpected)
