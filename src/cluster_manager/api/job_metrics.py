"""The queue and the jobs as Prometheus metric families, made at scrape time from the figures
the database holds for every process (service.monitoring): a job run by any worker counts,
whichever server is scraped."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from cluster_manager.core.models import Verdict
from cluster_manager.service.monitoring import DISPATCH_ERROR, LOST, RUN_SECONDS_BUCKETS, Figures

NO_LAUNCHER = "none"  # a failed job that never reached a launcher
# How a job that reached a launcher can end: its run's verdict (a run never reports `failed`),
# or given up on at its dispatch or after it.
LAUNCHED_OUTCOMES = (*(v.value for v in Verdict if v is not Verdict.FAILED), DISPATCH_ERROR, LOST)
Labels = tuple[str, ...]


class MonotonicTotals:
    """Keeps each counter read from the database from going down. The database's totals only
    grow (storage.ended_totals), but a rebuild counts them afresh from the jobs that remain
    (migration 0023 rolled back and applied again after submissions were deleted), and
    Prometheus reads any fall of a counter as a restart (so `rate` would see a burst of
    everything counted so far): what fell is remembered and added back, and a series seen
    once is kept, per server process."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, Labels], float] = {}
        self._fallen: dict[tuple[str, Labels], float] = {}

    def held(self, family: str, values: Mapping[Labels, float]) -> dict[Labels, float]:
        """`values` by label values, each raised by what its series lost before; series seen
        before and absent now read as 0 plus that."""
        seen = {labels for (name, labels) in self._last if name == family}
        held: dict[Labels, float] = {}
        for labels in sorted(seen | set(values)):
            key = (family, labels)
            value = values.get(labels, 0.0)
            last = self._last.get(key, 0.0)
            if value < last:
                self._fallen[key] = self._fallen.get(key, 0.0) + last - value
            self._last[key] = value
            held[labels] = value + self._fallen.get(key, 0.0)
        return held


class JobFamilies(Collector):
    """The families of one scrape; `figures` None: the database did not answer."""

    def __init__(self, figures: Figures | None, totals: MonotonicTotals, query_s: float) -> None:
        self.figures = figures
        self.totals = totals
        self.query_s = query_s

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "cluster_manager_database_up",
            "1 when this scrape read the queue and job figures from the database, else 0",
            value=0 if self.figures is None else 1,
        )
        yield GaugeMetricFamily(
            "cluster_manager_metrics_query_seconds",
            "How long this scrape took to read the queue and job figures from the database",
            value=self.query_s,
        )
        if self.figures is None:
            return
        yield from _gpu_gauges(self.figures)
        yield from self._ended_jobs(self.figures)
        yield self._run_seconds(self.figures)

    def _ended_jobs(self, figures: Figures) -> Iterator[Metric]:
        ended: dict[Labels, float] = {
            (e.gpu, e.launcher or NO_LAUNCHER, e.outcome): e.count for e in figures.ended
        }
        # Each launcher's outcomes start at 0: `increase` misses a series' first sample.
        launched = {(gpu, launcher) for gpu, launcher, _ in ended if launcher != NO_LAUNCHER}
        for gpu, launcher in launched:
            for outcome in LAUNCHED_OUTCOMES:
                ended.setdefault((gpu, launcher, outcome), 0)
        jobs = CounterMetricFamily(
            "cluster_manager_jobs_ended",
            "Jobs that ended, ever, by GPU type, launcher and outcome: a finished job's run "
            f"verdict, or how a failed one stopped ({DISPATCH_ERROR}: no launcher would start "
            "it; lost: dispatched, then no result; not_dispatched: nothing served its type)",
            labels=["gpu", "launcher", "outcome"],
        )
        for labels, count in self.totals.held("jobs_ended", ended).items():
            jobs.add_metric(list(labels), count)
        yield jobs
        refused: dict[Labels, float] = {
            (gpu, launcher): n
            for (gpu, launcher, outcome), n in ended.items()
            if outcome == DISPATCH_ERROR
        }  # one series (0 at first) per launcher of each GPU type, as above
        errors = CounterMetricFamily(
            "cluster_manager_dispatch_errors",
            "Jobs failed for good because their launcher could not start them (every attempt's "
            "dispatch raised), ever, by GPU type and launcher",
            labels=["gpu", "launcher"],
        )
        for labels, count in self.totals.held("dispatch_errors", refused).items():
            errors.add_metric(list(labels), count)
        yield errors

    def _run_seconds(self, figures: Figures) -> Metric:
        family = HistogramMetricFamily(
            "cluster_manager_job_run_seconds",
            "Finished jobs' run time, ever, from dispatch to the recorded result, by GPU type",
            labels=["gpu"],
        )
        # As the library writes its own histograms' bounds (untyped there).
        bounds = [floatToGoString(b) for b in RUN_SECONDS_BUCKETS]  # type: ignore[no-untyped-call]
        for run in figures.run_seconds:
            parts: dict[Labels, float] = {
                **{(run.gpu, le): float(n) for le, n in zip(bounds, run.buckets, strict=True)},
                (run.gpu, "+Inf"): float(run.count),
                (run.gpu, "sum"): run.total_s,
            }
            held = self.totals.held(f"run_seconds:{run.gpu}", parts)
            family.add_metric(
                [run.gpu],
                buckets=[(le, held[run.gpu, le]) for le in [*bounds, "+Inf"]],
                sum_value=held[run.gpu, "sum"],
            )
        return family


def _gpu_gauges(figures: Figures) -> Iterator[Metric]:
    gauges = {
        "queue_jobs": "Jobs queued for the GPU type, not yet claimed by a scheduler",
        "queue_oldest_wait_seconds": "How long the oldest job queued for the GPU type has "
        "waited since it was submitted (0: none waits)",
        "jobs_in_flight": "Jobs of the GPU type claimed or running on a launcher",
        "gpu_schedulers": "Live schedulers (heartbeat within the last minute) that serve the "
        "GPU type",
        "gpu_open_leaderboards": "Leaderboards before their deadline that run on the GPU type",
    }
    families = {
        name: GaugeMetricFamily(f"cluster_manager_{name}", text, labels=["gpu"])
        for name, text in gauges.items()
    }
    for load in figures.gpus:
        families["queue_jobs"].add_metric([load.gpu], load.queued)
        families["queue_oldest_wait_seconds"].add_metric([load.gpu], load.oldest_wait_s)
        families["jobs_in_flight"].add_metric([load.gpu], load.in_flight)
        families["gpu_schedulers"].add_metric([load.gpu], load.schedulers)
        families["gpu_open_leaderboards"].add_metric([load.gpu], load.open_leaderboards)
    yield from families.values()
    yield GaugeMetricFamily(
        "cluster_manager_schedulers",
        "Live whole-queue schedulers (heartbeat within the last minute), whatever they serve",
        value=figures.schedulers,
    )
