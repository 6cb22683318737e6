"""Who calls: a user's API token, sent as popcorn-cli sends it (`X-Popcorn-Cli-Id`) or as
`Authorization: Bearer`, or the admin token; for reading (GET) also a signed-in browser's
session cookie, so that a page can follow its submission's events. Every authenticated
request counts against its token's per-minute limit. An answer that holds a secret of its
caller's is marked for no cache to keep (`Private`)."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from datetime import timedelta

from fastapi import Depends, Request, Response
from limits import RateLimitItemPerMinute, storage, strategies

from cluster_manager.service import (
    PermissionDeniedError,
    RateLimitedError,
    Service,
    Submitter,
    UnauthorizedError,
    WebSession,
)

POPCORN_HEADER = "X-Popcorn-Cli-Id"
SESSION_COOKIE = "cm_session"
# A cookie comes with any request the browser makes to this site; it authenticates only
# reading, so a forged cross-site request could change nothing even without SameSite.
COOKIE_METHODS = frozenset({"GET", "HEAD"})
NO_TOKEN = (
    f"no API token: send it as {POPCORN_HEADER} or Authorization: Bearer "
    "(get one with /token in Discord, or from an admin: cluster-manager user token NAME)"
)


@dataclass(frozen=True)
class Caller:
    user: Submitter | None  # None: the admin token, which is nobody's
    admin: bool = False

    @property
    def key(self) -> str:
        """Whose requests these are, for counting them."""
        return "admin" if self.user is None else f"user:{self.user.external_id}"

    def require_user(self) -> Submitter:
        if self.user is None:
            raise PermissionDeniedError("the admin token acts for no user: use a user's token")
        return self.user


class RequestLimiter:
    """A moving window of requests per token (the `limits` library, in memory: one server
    process is one window; several behind a balancer would each keep their own)."""

    def __init__(self, per_minute: int, what: str = "requests per minute with this token") -> None:
        self.per_minute = per_minute
        self.what = what
        self._item = RateLimitItemPerMinute(per_minute)
        self._limiter = strategies.MovingWindowRateLimiter(storage.MemoryStorage())

    def hit(self, key: str) -> None:
        if self._limiter.hit(self._item, "api", key):
            return
        reset = self._limiter.get_window_stats(self._item, "api", key).reset_time
        raise RateLimitedError(
            f"over {self.per_minute} {self.what}",
            retry_after=timedelta(seconds=max(1.0, reset - time.time())),
        )


def presented_token(request: Request) -> str | None:
    token = request.headers.get(POPCORN_HEADER, "").strip()
    if not token:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else ""
    return token or None


def is_admin_token(token: str, admin_token: str | None) -> bool:
    return admin_token is not None and hmac.compare_digest(
        token.encode("utf-8", "surrogateescape"), admin_token.encode("utf-8")
    )


async def caller(request: Request) -> Caller:
    """The FastAPI dependency of every authenticated route."""
    state = request.app.state
    token = presented_token(request)
    if token is None:
        session = await signed_in(request) if request.method in COOKIE_METHODS else None
        if session is None:
            raise UnauthorizedError(NO_TOKEN)
        state.limiter.hit("admin" if session.user is None else f"user:{session.user.external_id}")
        return Caller(session.user, admin=session.admin)
    if is_admin_token(token, state.admin_token):
        state.limiter.hit("admin")
        return Caller(None, admin=True)
    service: Service = state.service
    user = await service.accounts.authenticate(token)
    state.limiter.hit(f"user:{user.external_id}")
    return Caller(user)


async def signed_in(request: Request) -> WebSession | None:
    """The live web session of the request's cookie, if any."""
    session_id = request.cookies.get(SESSION_COOKIE)
    if not session_id:
        return None
    service: Service = request.app.state.service
    return await service.sessions.get(session_id, admin_token=request.app.state.admin_token)


async def optional_caller(request: Request) -> Caller | None:
    """As `caller` when the request carries credentials; None when it carries none."""
    if presented_token(request) is None and SESSION_COOKIE not in request.cookies:
        return None
    return await caller(request)


def no_store(response: Response) -> None:
    """The answer holds a secret of its caller's (a one-time code, a submission's code and
    output, whatever the admin reads): no browser cache or proxy keeps a copy for the next
    person at that machine to read. Streams of events carry it already (sse-starlette)."""
    response.headers["Cache-Control"] = "no-store"


# A route's `dependencies=[Private]`: its successful answers carry `Cache-Control: no-store`.
Private = Depends(no_store)
