"""GitHub's REST API through a pool of tokens: rate limits, retries, threads, error mapping.

PyGithub is synchronous: every call runs in a thread, on a client of its own (PyGithub's
connection object is not safe to share between threads). Tokens are used in order; one that
hits a rate limit is set aside until its reset, and when every token is out the pool waits for
the earliest reset (up to `max_rate_limit_wait`). 5xx answers and network errors are retried
with backoff. Every PyGithub and requests error leaves this module as a `LauncherError`.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from cluster_manager.core.errors import LauncherError

T = TypeVar("T")
Call = Callable[["Client"], "Answer"]

PER_PAGE = 100
TRANSIENT_WAIT = wait_exponential_jitter(multiplier=0.25, max=8, jitter=0.25)


class GitHubRateLimitedError(LauncherError):
    """Every token is rate-limited for longer than the launcher is willing to wait."""


class HttpError(LauncherError):
    """A 4xx answer from GitHub other than a rate limit: `status` says which."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class TransientError(LauncherError):
    """A 5xx answer or a network error: worth trying again."""


class RateLimitError(LauncherError):
    """One token is rate-limited by GitHub; `delay` is how long until it may ask again."""

    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


@dataclass
class Client:
    gh: Github
    token: str
    session: requests.Session


@dataclass
class Token:
    secret: str
    idle: list[Client] = field(default_factory=list)
    blocked_until: float = -math.inf  # on the pool's clock


@dataclass
class Answer:
    status: int
    headers: dict[str, Any]
    data: Any


class TokenPool:
    """Runs calls on a client of the first token not rate-limited, retrying what is worth it."""

    def __init__(
        self,
        tokens: Sequence[str],
        *,
        base_url: str,
        clock: Callable[[], float],
        request_timeout: float,
        write_interval: float,
        max_rate_limit_wait: float,
        attempts: int,
    ) -> None:
        self.base_url = base_url
        self.request_timeout = request_timeout
        # GitHub asks for a pause between content-creating requests (secondary limits).
        self.write_interval = write_interval
        self.max_rate_limit_wait = max_rate_limit_wait
        self._clock = clock
        self._attempts = attempts
        self._tokens = [Token(t) for t in tokens]
        self._write_lock = asyncio.Lock()
        self._last_write = -math.inf

    def retrying(self, *errors: type[BaseException]) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception_type(errors),
            wait=_backoff,
            stop=stop_after_attempt(self._attempts + len(self._tokens)),
            reraise=True,
        )

    async def call(self, fn: Callable[[Client], T], *, retry_transient: bool = True) -> T:
        errors: tuple[type[BaseException], ...] = (RateLimitError,)
        if retry_transient:
            errors += (TransientError,)
        async for attempt in self.retrying(*errors):
            with attempt:
                return await self._call_once(fn)
        raise AssertionError("unreachable")

    async def write(self, fn: Callable[[Client], T], *, retry_transient: bool = True) -> T:
        """A content-creating request, spaced from the previous one by `write_interval`."""
        async with self._write_lock:
            wait = self._last_write + self.write_interval - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                return await self.call(fn, retry_transient=retry_transient)
            finally:
                self._last_write = self._clock()

    async def download(self, url: str, *, limit: int) -> bytes:
        """The body at `url` (an artifact's zip), refused once it grows past `limit` bytes."""
        return await self.call(partial(self._download, url=url, limit=limit))

    def close(self) -> None:
        """Closes every idle client's HTTP sessions (PyGithub's and the artifact one)."""
        for token in self._tokens:
            for client in token.idle:
                client.gh.close()
                client.session.close()
            token.idle.clear()

    async def _call_once(self, fn: Callable[[Client], T]) -> T:
        token = await self._ready_token()
        client = token.idle.pop() if token.idle else self._new_client(token.secret)
        reusable = True
        try:
            result = await asyncio.to_thread(_guarded, fn, client)
        except asyncio.CancelledError:
            reusable = False  # its thread may still be using it
            raise
        except RateLimitError as exc:
            token.blocked_until = max(token.blocked_until, self._clock() + exc.delay)
            raise
        finally:
            if reusable:
                token.idle.append(client)
        self._note_quota(token, client)
        return result

    async def _ready_token(self) -> Token:
        """The first token not known to be exhausted; waits for the earliest reset if all are."""
        while True:
            now = self._clock()
            ready = next((t for t in self._tokens if t.blocked_until <= now), None)
            if ready is not None:
                return ready
            wait = min(t.blocked_until for t in self._tokens) - now
            if wait > self.max_rate_limit_wait:
                raise GitHubRateLimitedError(
                    f"every GitHub token is rate-limited for another {math.ceil(wait)} s"
                )
            await asyncio.sleep(wait)

    def _note_quota(self, token: Token, client: Client) -> None:
        """Sets a token aside as soon as an answer says its quota is spent."""
        remaining, _limit = client.gh.requester.rate_limiting
        reset = client.gh.requester.rate_limiting_resettime
        if remaining == 0 and reset:
            token.blocked_until = self._clock() + _until_epoch(reset)

    def _new_client(self, token: str) -> Client:
        gh = Github(
            auth=Auth.Token(token),
            base_url=self.base_url,
            timeout=math.ceil(self.request_timeout),
            retry=None,  # retries and rate limits are handled here, without blocking a thread
            lazy=True,
            per_page=PER_PAGE,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        return Client(gh, token, requests.Session())

    def _download(self, client: Client, *, url: str, limit: int) -> bytes:
        # GitHub redirects to a storage URL; requests drops the token when the redirect
        # leaves the API host.
        headers = {
            "Authorization": f"Bearer {client.token}",
            "Accept": "application/vnd.github+json",
            "User-Agent": "cluster-manager",
        }
        with client.session.get(
            url, headers=headers, stream=True, timeout=self.request_timeout
        ) as response:
            if response.status_code >= 400:
                lowered = {k.lower(): v for k, v in response.headers.items()}
                raise _http_error(response.status_code, lowered, _json_or_none(response.text))
            return _bounded(response.iter_content(1 << 16), limit)


# --- calls and answers ------------------------------------------------------------------------


def get(path: str, params: dict[str, str] | None = None, etag: str | None = None) -> Call:
    return partial(request_json, verb="GET", path=path, params=params, etag=etag)


def request_json(
    client: Client,
    *,
    verb: str,
    path: str,
    params: dict[str, str] | None = None,
    etag: str | None = None,
) -> Answer:
    headers = {"Accept": "application/vnd.github+json"}
    if etag:
        headers["If-None-Match"] = etag
    status, response_headers, body = client.gh.requester.requestJson(
        verb, path, parameters=params, headers=headers
    )
    data = _json_or_none(body)
    if status >= 400:
        raise _http_error(status, response_headers, data)
    if status == 200 and data is None:
        raise LauncherError(f"GitHub answered {verb} {path} with a body that is not JSON")
    return Answer(status, response_headers, data)


def answer_field(data: Any, name: str, kind: type) -> Any:
    """`data[name]`, which GitHub's answer must hold as a `kind`."""
    value = data.get(name) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise LauncherError(f"GitHub's answer has no {name!r}")
    return value


def _guarded(fn: Callable[[Client], T], client: Client) -> T:
    """Runs one call in a worker thread; foreign errors become LauncherErrors here."""
    try:
        return fn(client)
    except LauncherError:
        raise
    except GithubException as exc:
        raise _http_error(exc.status, exc.headers or {}, exc.data) from exc
    except requests.RequestException as exc:
        raise TransientError(f"cannot reach GitHub: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise LauncherError(f"unexpected answer from GitHub: {exc!r}") from exc


def _http_error(status: int, headers: dict[str, Any], data: Any) -> LauncherError:
    message = data.get("message") if isinstance(data, dict) else None
    text = f"GitHub answered {status}" + (f": {message}" if message else "")
    delay = _rate_limit_delay(status, headers, message)
    if delay is not None:
        return RateLimitError(text, delay)
    if status >= 500:
        return TransientError(text)
    return HttpError(text, status)


def _rate_limit_delay(status: int, headers: dict[str, Any], message: str | None) -> float | None:
    """Seconds to leave the token alone, or None when the answer is no rate limit."""
    if status not in (403, 429):
        return None
    retry_after = _number(headers.get("retry-after"))
    if retry_after is not None:  # secondary limits say how long to wait
        return retry_after
    if str(headers.get("x-ratelimit-remaining")) == "0":
        reset = _number(headers.get("x-ratelimit-reset"))
        return _until_epoch(reset) if reset is not None else 60.0
    if status == 429 or "rate limit" in (message or "").lower():
        return 60.0  # GitHub's advice for a secondary limit without Retry-After
    return None


def _until_epoch(epoch: float) -> float:
    return max(0.0, epoch - time.time()) + 0.5  # a little slack for clock skew


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _backoff(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome is not None else None
    if isinstance(error, RateLimitError):
        return 0.0  # the next token is tried at once; _ready_token waits if none is left
    return TRANSIENT_WAIT(state)


def _json_or_none(body: str | bytes | None) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def _bounded(chunks: Iterable[bytes], limit: int) -> bytes:
    parts, total = [], 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise LauncherError(f"the result artifact is larger than {limit:,} bytes")
        parts.append(chunk)
    return b"".join(parts)
