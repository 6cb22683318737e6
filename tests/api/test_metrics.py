"""GET /metrics: the queue, the ended jobs and their run times from the database, the request
latencies of this server, in Prometheus' text format, read back with its own parser; who may
read it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from cluster_manager.api.app import create_api
from cluster_manager.api.job_metrics import MonotonicTotals
from cluster_manager.app import App
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.scheduling.hosted import keep_scheduling, stop_scheduling
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.settings import Settings, load_settings
from tests.api.conftest import FAST, popcorn_headers, token_of
from tests.api.test_submissions import submit, wait_done
from tests.support.fakes import FakeLauncher

METRICS_TOKEN = "metrics-token-for-tests"


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(text: str, name: str, **labels: str) -> float | None:
    """The one sample called `name` with exactly these labels; None when there is none."""
    found = [s.value for s in samples(text) if s.name == name and s.labels == labels]
    assert len(found) <= 1, f"{name} {labels}: {found}"
    return found[0] if found else None


async def scrape(client: httpx.AsyncClient) -> str:
    answer = await client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == CONTENT_TYPE_PLAIN_0_0_4
    return answer.text


async def test_queued_then_finished_jobs_show_in_the_queue_and_by_outcome(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    accepted = await submit(client, token, "test")
    assert accepted.status_code == 202, accepted.text
    await asyncio.sleep(0.05)  # the job has waited a little

    waiting = await scrape(client)
    assert value(waiting, "cluster_manager_queue_jobs", gpu="CPU") == 1
    assert value(waiting, "cluster_manager_queue_jobs", gpu="CPU2") == 0
    oldest = value(waiting, "cluster_manager_queue_oldest_wait_seconds", gpu="CPU")
    assert oldest is not None and 0.05 <= oldest < 60
    assert value(waiting, "cluster_manager_queue_oldest_wait_seconds", gpu="CPU2") == 0
    assert value(waiting, "cluster_manager_gpu_schedulers", gpu="CPU") == 0
    assert value(waiting, "cluster_manager_gpu_open_leaderboards", gpu="CPU") == 1
    assert value(waiting, "cluster_manager_database_up") == 1
    assert not [s for s in samples(waiting) if s.name == "cluster_manager_jobs_ended_total"]

    stop = asyncio.Event()
    scheduling = asyncio.create_task(keep_scheduling(app.scheduler, stop, FAST))
    try:
        details = await wait_done(client, token, accepted.json()["details"]["id"])
        assert details["job"]["status"] == "succeeded"
        served = await scrape(client)
    finally:
        await stop_scheduling(scheduling, stop)
    assert value(served, "cluster_manager_gpu_schedulers", gpu="CPU") == 1
    assert value(served, "cluster_manager_schedulers") == 1
    assert value(served, "cluster_manager_queue_jobs", gpu="CPU") == 0
    assert value(served, "cluster_manager_queue_oldest_wait_seconds", gpu="CPU") == 0
    ended = {
        (s.labels["gpu"], s.labels["launcher"], s.labels["outcome"]): s.value
        for s in samples(served)
        if s.name == "cluster_manager_jobs_ended_total"
    }
    assert {labels: n for labels, n in ended.items() if n} == {("CPU", "local", "passed"): 1}
    # The launcher's other outcomes are there at 0, for `increase` to see their first job.
    assert ended[("CPU", "local", "internal_error")] == ended[("CPU", "local", "lost")] == 0
    assert value(served, "cluster_manager_dispatch_errors_total", gpu="CPU", launcher="local") == 0
    assert value(served, "cluster_manager_job_run_seconds_count", gpu="CPU") == 1
    assert value(served, "cluster_manager_job_run_seconds_bucket", gpu="CPU", le="+Inf") == 1
    assert value(served, "cluster_manager_job_run_seconds_bucket", gpu="CPU", le="3600.0") == 1
    run_s = value(served, "cluster_manager_job_run_seconds_sum", gpu="CPU")
    assert run_s is not None and 0 <= run_s < 60


async def test_a_launcher_that_refuses_every_dispatch_counts_as_a_dispatch_error(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    accepted = await submit(client, token, "test")
    down = FakeLauncher(name="local", submit_failures=1000)
    config = dataclasses.replace(FAST, max_attempts=1)
    scheduler = Scheduler(app.pool, app.registry, {"local": down}, config=config)
    job_ids = {job["id"] for job in accepted.json()["receipt"]["jobs"]}
    await asyncio.wait_for(scheduler.run_until_idle(job_ids), 30)
    assert (await wait_done(client, token, accepted.json()["details"]["id"]))["job"]["error"]

    text = await scrape(client)
    assert value(text, "cluster_manager_dispatch_errors_total", gpu="CPU", launcher="local") == 1
    assert (
        value(
            text,
            "cluster_manager_jobs_ended_total",
            gpu="CPU",
            launcher="local",
            outcome="dispatch_error",
        )
        == 1
    )
    assert value(text, "cluster_manager_job_run_seconds_count", gpu="CPU") is None  # no run


async def test_request_latencies_count_each_request_by_route_template(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    for _ in range(3):
        assert (await client.get("/queue")).status_code == 200
    for board in ("identity", "ghost"):
        await client.get(f"/leaderboards/{board}", headers=popcorn_headers(token))
    assert (await client.get("/no/such/page/at/all")).status_code == 404

    text = await scrape(client)
    name = "cluster_manager_http_request_duration_seconds_count"
    assert value(text, name, route="/queue", method="GET", status="2xx") == 3
    # Both boards count under the route's template, the unknown one as a 4xx.
    assert value(text, name, route="/leaderboards/{name}", method="GET", status="2xx") == 1
    assert value(text, name, route="/leaderboards/{name}", method="GET", status="4xx") == 1
    assert value(text, name, route="unmatched", method="GET", status="4xx") == 1
    total = "cluster_manager_http_request_duration_seconds_sum"
    seconds = value(text, total, route="/queue", method="GET", status="2xx")
    assert seconds is not None and 0 < seconds < 30
    # The scrape itself counts from the next one on.
    again = await scrape(client)
    assert value(again, name, route="/metrics", method="GET", status="2xx") == 1


async def test_a_scraper_that_asks_for_openmetrics_gets_it(client: httpx.AsyncClient):
    accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.1"
    assert (await client.get("/queue")).status_code == 200
    answer = await client.get("/metrics", headers={"Accept": accept})
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    assert answer.text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_parser.text_string_to_metric_families(answer.text)}
    assert families["cluster_manager_http_request_duration_seconds"].type == "histogram"
    assert families["cluster_manager_queue_jobs"].type == "gauge"
    assert not [n for n in families if n.endswith("_created")]


async def test_concurrent_scrapes_share_one_read_of_the_database(
    app: App, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
):
    reads = 0
    read = app.service.monitoring.figures

    async def slow_read() -> Any:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.2)
        return await read()

    monkeypatch.setattr(app.service.monitoring, "figures", slow_read)
    answers = await asyncio.gather(*(client.get("/metrics") for _ in range(5)))
    assert [a.status_code for a in answers] == [200] * 5
    assert reads == 1
    assert value(answers[-1].text, "cluster_manager_database_up") == 1
    await scrape(client)
    assert reads == 2  # a later scrape reads afresh


@pytest.fixture
async def guarded(app: App, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    api = create_api(app.service, dataclasses.replace(settings, metrics_token=METRICS_TOKEN))
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.test") as http:
        yield http


async def test_with_a_token_metrics_answer_only_its_bearer(guarded: httpx.AsyncClient):
    refused = [
        await guarded.get("/metrics"),
        await guarded.get("/metrics", headers={"Authorization": "Bearer wrong"}),
        await guarded.get("/metrics", headers={"Authorization": f"Basic {METRICS_TOKEN}"}),
        await guarded.get("/metrics", headers=popcorn_headers(METRICS_TOKEN)),
    ]
    assert [a.status_code for a in refused] == [401] * 4
    assert refused[0].headers["WWW-Authenticate"] == "Bearer"
    assert METRICS_TOKEN not in refused[1].text
    allowed = await guarded.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert allowed.status_code == 200
    assert value(allowed.text, "cluster_manager_database_up") == 1


async def test_metrics_off_is_not_found_and_outside_the_schema(app: App, settings: Settings):
    api = create_api(app.service, dataclasses.replace(settings, metrics_enabled=False))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api), base_url="http://api.test"
    ) as http:
        assert (await http.get("/metrics")).status_code == 404
        schema = (await http.get("/openapi.json")).json()
    assert "/metrics" not in schema["paths"]


def test_the_settings_read_metrics_on_off_and_keep_the_token_out_of_repr():
    assert load_settings({}, dotenv_path=None).metrics_enabled is True
    assert load_settings({}, dotenv_path=None).metrics_token is None
    chosen = load_settings(
        {"CLUSTER_MANAGER_METRICS": "off", "CLUSTER_MANAGER_METRICS_TOKEN": " s3cret "},
        dotenv_path=None,
    )
    assert chosen.metrics_enabled is False and chosen.metrics_token == "s3cret"
    assert "s3cret" not in repr(chosen)
    with pytest.raises(ClusterManagerError, match="CLUSTER_MANAGER_METRICS must be on or off"):
        load_settings({"CLUSTER_MANAGER_METRICS": "maybe"}, dotenv_path=None)


def test_counters_from_the_database_never_go_down_when_jobs_are_deleted():
    totals = MonotonicTotals()
    assert totals.held("jobs", {("CPU", "passed"): 5}) == {("CPU", "passed"): 5}
    # Two of the five deleted, then one more finished: 5 kept, then 6.
    assert totals.held("jobs", {("CPU", "passed"): 3}) == {("CPU", "passed"): 5}
    assert totals.held("jobs", {("CPU", "passed"): 4}) == {("CPU", "passed"): 6}
    # Every job of a series deleted: the series stays, at what it had counted.
    assert totals.held("jobs", {("CPU", "failed"): 1}) == {
        ("CPU", "failed"): 1,
        ("CPU", "passed"): 6,
    }
    assert totals.held("other", {("CPU", "passed"): 1}) == {("CPU", "passed"): 1}
