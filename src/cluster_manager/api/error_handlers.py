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

from cluster_manager.core.errors import ClusterManagerError, InvalidSubmissionError
from cluster_manager.service import (
    AlreadyExistsError,
    BannedError,
    DeadlinePassedError,
    GpuNotServedError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    StillRunningError,
    SubmissionsPausedError,
    UnauthorizedError,
)

log = logging.getLogger(__name__)


class UploadTooLargeError(ClusterManagerError):
    """A request body or uploaded file over its limit."""


class BadRequestError(ClusterManagerError):
    """A request that is not what the endpoint takes (a malformed multipart body, say)."""


# Most specific first: the first matching class decides the status.
STATUS_OF: tuple[tuple[type[ClusterManagerError], int], ...] = (
    (UnauthorizedError, 401),
    (PermissionDeniedError, 403),
    (BannedError, 403),
    (DeadlinePassedError, 403),
    (NotFoundError, 404),
    (AlreadyExistsError, 409),
    (StillRunningError, 409),
    (GpuNotServedError, 409),  # the deployment runs no such GPU (yet): a setting is missing
    (UploadTooLargeError, 413),
    (InvalidSubmissionError, 422),
    (RateLimitedError, 429),
    (BadRequestError, 400),
    (SubmissionsPausedError, 503),
)


def status_of(exc: ClusterManagerError) -> int:
    return next((status for kind, status in STATUS_OF if isinstance(exc, kind)), 400)


def detail(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


async def _ours(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ClusterManagerError)
    headers = None
    if isinstance(exc, RateLimitedError):
        headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after.total_seconds())))}
    if isinstance(exc, UnauthorizedError):
        headers = {"WWW-Authenticate": "Bearer"}
    return detail(status_of(exc), str(exc), headers)


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


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    error_id = uuid.uuid4().hex[:8]
    log.error("error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc)
    return detail(500, f"internal error (id {error_id}); it has been logged")


def install(api: FastAPI) -> None:
    api.add_exception_handler(ClusterManagerError, _ours)
    api.add_exception_handler(RequestValidationError, _invalid)
    api.add_exception_handler(HTTPException, _http)
    api.add_exception_handler(asyncpg.exceptions.DataError, _unstorable)
    api.add_exception_handler(Exception, _unexpected)
