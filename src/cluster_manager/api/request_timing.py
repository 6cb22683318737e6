"""Each HTTP request's latency in this server process, by route template, method and status
class: an ASGI middleware around the whole app feeding one Prometheus histogram."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from prometheus_client import Histogram
from starlette.types import Message, Receive, Scope, Send

# Requests that matched no route (404s, bodies refused before routing) share one label value,
# so that made-up paths cannot add series.
UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds; uploads and first page renders take longer than the API's reads.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class RequestTimes:
    """The histogram, kept per app (not in the process-wide registry: each app its own)."""

    def __init__(self) -> None:
        self.histogram = Histogram(
            "cluster_manager_http_request_duration_seconds",
            "Time from a request's arrival to the start of its response (its status and "
            "headers; a live event stream counts until it opens), in this server process, by "
            "route template, method and status class",
            ["route", "method", "status"],
            buckets=BUCKETS,
            registry=None,
        )

    def observe(self, scope: Scope, status: int, seconds: float) -> None:
        # The router leaves the matched route in the scope; its path is the template.
        route = getattr(scope.get("route"), "path", None) or UNMATCHED
        method = scope.get("method", "")
        self.histogram.labels(
            route=route,
            method=method if method in METHODS else "other",
            status=f"{status // 100}xx",
        ).observe(seconds)


class RequestTiming:
    """ASGI middleware: times every HTTP request to its response's start; a request that
    ends in an unhandled error counts as the 500 the server then answers."""

    def __init__(
        self, app: Callable[[Scope, Receive, Send], Awaitable[None]], times: RequestTimes
    ) -> None:
        self.app = app
        self.times = times

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answered = False

        async def timed(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                self.times.observe(scope, message["status"], time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, timed)
        except Exception:
            if not answered:
                self.times.observe(scope, 500, time.perf_counter() - started)
            raise
