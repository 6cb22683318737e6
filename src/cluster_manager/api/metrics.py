"""GET /metrics: Prometheus' text format (OpenMetrics to a scraper that asks for it), for
organisers to watch and alert on. The queue and job figures come from the database at scrape
time (any process's jobs count); the request latencies are this server process's own. Open,
off (404), or only to a bearer token, as the settings say; outside the OpenAPI schema and the
per-token rate limits (no `caller`)."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from fastapi import APIRouter, Request, Response
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from cluster_manager.api.job_metrics import JobFamilies, MonotonicTotals
from cluster_manager.api.request_timing import RequestTimes
from cluster_manager.service import NotFoundError, Service, UnauthorizedError
from cluster_manager.service.errors import DatabaseUnavailableError
from cluster_manager.service.monitoring import Figures

router = APIRouter(include_in_schema=False)


@dataclass
class MetricsEndpoint:
    """What /metrics needs across requests, kept on the app's state."""

    enabled: bool = True
    token: str | None = field(default=None, repr=False)  # None: open
    requests: RequestTimes = field(default_factory=RequestTimes)
    totals: MonotonicTotals = field(default_factory=MonotonicTotals)
    _reading: asyncio.Task[tuple[Figures | None, float]] | None = field(
        default=None, init=False, repr=False
    )

    def check_caller(self, request: Request) -> None:
        if not self.enabled:
            raise NotFoundError("not found: this server does not serve /metrics")
        if self.token is None:
            return
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode("utf-8", "surrogateescape"), self.token.encode("utf-8")
        ):
            raise UnauthorizedError("/metrics needs this server's metrics token as a Bearer token")

    async def read_figures(self, service: Service) -> tuple[Figures | None, float]:
        """The database's figures (None: it did not answer) and how long reading them took.
        Scrapes that arrive while a read is under way share it: a flood of requests costs the
        database one read at a time."""
        if self._reading is None:
            self._reading = asyncio.create_task(_read(service))
            self._reading.add_done_callback(self._read_done)
        # Shielded: one scraper hanging up must not cancel the read the others wait for.
        return await asyncio.shield(self._reading)

    def _read_done(self, _task: object) -> None:
        self._reading = None


async def _read(service: Service) -> tuple[Figures | None, float]:
    started = time.perf_counter()
    try:
        figures = await service.monitoring.figures()
    except DatabaseUnavailableError:
        figures = None  # still answer: the latencies, and that the database is down
    return figures, time.perf_counter() - started


class Exposition(Collector):
    """The families of several collectors, exposed as one, without the `_created` samples
    (when each series began): in the plain text format each would be one more series, of a
    time nobody alerts on."""

    def __init__(self, *parts: Collector) -> None:
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        for part in self.parts:
            for family in part.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    endpoint: MetricsEndpoint = request.app.state.metrics
    endpoint.check_caller(request)
    figures, query_s = await endpoint.read_figures(request.app.state.service)
    jobs = JobFamilies(figures, endpoint.totals, query_s)
    # The text format, or OpenMetrics where the scraper asks for it (as Prometheus does).
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return Response(encode(Exposition(endpoint.requests.histogram, jobs)), media_type=content_type)
