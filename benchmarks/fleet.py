"""fleet_*: a competition's busiest hours on a 40-GPU fleet, through the real queue.

Ten times GPU MODE's production volume (about 2,400 submissions a day there: 24,000 a day
here, 16.7 a minute) arrives for 90 simulated minutes: 30 quiet, 30 of a deadline rush at
three times the rate, 30 quiet again. 200 users submit alike (each submission's user is drawn
uniformly), half in test mode, a fifth benchmark, the rest ranked (a public and a secret run).
Four GPU types share 40 GPUs (H100 16, A100 10, B200 8, MI300X 6), asked for in that
proportion. Runs take what they take on real runners: test 25 s, benchmark 45 s, each ranked
run 70 s, each drawn around that (log-normal, sigma 0.3).

Everything but the GPUs is real: `Service.submissions.submit` stores each submission, three
`Scheduler`s (three workers) claim, dispatch, follow and record on one Postgres, with fake
launchers whose runs sleep their time. The clock runs `SPEEDUP` times faster than a real one:
run times, arrivals and the figures are in simulated seconds; what the database costs is not
sped up, so a fleet that keeps up here keeps up for real with room to spare.

    fleet_throughput_per_min     submissions finished per simulated minute, over the whole run
                                 (arrivals average 27.8 a minute; informative)
    fleet_queue_wait_p95_s       a job's wait from queued to claimed, 95th percentile (what the
                                 fleet's size forces in the rush: informative)
    fleet_wait_p95_over_ideal    that p95 over the same fleet's if running it cost nothing: the
                                 same arrivals, per GPU type in order, on the first GPU free
                                 (<= 1.25)
    fleet_user_wait_p95_ratio    the worst user's p95 wait over the median user's (<= 2)
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import ghlib
from benchlib import Figure, log, median, percentile, report, scratch_database

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, ProgressCallback, RunHandle, RunState
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from cluster_manager.storage.database import create_pool

# FLEET_SPEEDUP=240 asks four times as much of the database per real second: as four times the
# volume would at 60 (docs/SCALING.md, where the first limit is).
SPEEDUP = float(os.environ.get("FLEET_SPEEDUP", "60"))
GPUS = {"H100": 16, "A100": 10, "B200": 8, "MI300X": 6}
PER_MINUTE = 24_000 / 1440
# (simulated minutes, rate multiplier): quiet, the deadline rush, quiet.
PHASES = ((30, 1.0), (30, 3.0), (30, 1.0))
USERS = 200
MODES = ((Mode.TEST, 0.5), (Mode.BENCHMARK, 0.2), (Mode.LEADERBOARD, 0.3))
RUN_S = {Mode.TEST: 25.0, Mode.BENCHMARK: 45.0, Mode.LEADERBOARD: 70.0}
RUN_SIGMA = 0.3
WORKERS = 3
# What the platform may add to the waits the fleet's size forces: its p95 over the ideal's.
WAIT_OVER_IDEAL_TARGET = 1.25
FAIRNESS_TARGET = 2.0
REGISTRY = GpuRegistry({name: GpuType(name, "fleet", max_concurrent=n) for name, n in GPUS.items()})


@dataclass
class FleetLauncher(Launcher):
    """Every run passes after its mode's time, drawn around it, sped up."""

    name: str = "fleet"
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    ends: dict[str, float] = field(default_factory=dict)
    modes: dict[str, Mode] = field(default_factory=dict)

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        took = RUN_S[request.mode] * self.rng.lognormvariate(0.0, RUN_SIGMA)
        self.ends[key] = time.monotonic() + took / SPEEDUP
        self.modes[key] = request.mode
        return RunHandle(self.name, key)

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        return {h.external_id: RunState.FINISHED for h in handles}

    async def result(self, handle: RunHandle) -> RunResult:
        return RunResult(True, Verdict.PASSED, self.modes[handle.external_id], "ok")

    async def cancel(self, handle: RunHandle) -> None:
        pass

    async def follow(
        self, handle: RunHandle, *, timeout: float, on_progress: ProgressCallback | None = None
    ) -> RunResult | None:
        await asyncio.sleep(max(0.0, self.ends[handle.external_id] - time.monotonic()))
        return await self.result(handle)


@dataclass(frozen=True)
class Arrival:
    at_s: float  # simulated
    user: str
    gpu: str
    mode: Mode


def plan(rng: random.Random) -> list[Arrival]:
    """Who submits what, where and when: the same for the fleet and for its ideal."""
    modes, mode_weights = zip(*MODES, strict=True)
    gpu_names, gpu_weights = list(GPUS), list(GPUS.values())
    return [
        Arrival(
            at,
            f"user{rng.randrange(USERS)}",
            rng.choices(gpu_names, gpu_weights)[0],
            rng.choices(modes, mode_weights)[0],
        )
        for at in arrivals(rng)
    ]


def arrivals(rng: random.Random) -> list[float]:
    """Simulated seconds at which submissions arrive: a Poisson process per phase."""
    times, start = [], 0.0
    for minutes, factor in PHASES:
        rate = PER_MINUTE * factor / 60.0
        t = start + rng.expovariate(rate)
        while t < start + minutes * 60:
            times.append(t)
            t += rng.expovariate(rate)
        start += minutes * 60
    return times


async def submit_all(service: Service, submissions: list[Arrival]) -> None:
    """Submits each at its time (sped up)."""
    code = ghlib.CODE.encode()
    began = time.monotonic()
    for s in submissions:
        await asyncio.sleep(max(0.0, began + s.at_s / SPEEDUP - time.monotonic()))
        user = Submitter(s.user, s.user)
        await service.submissions.submit("fleet", user, "s.py", code, gpus=[s.gpu], mode=s.mode)


def ideal_waits(submissions: list[Arrival], rng: random.Random) -> list[float]:
    """Each job's wait on a fleet that costs nothing to run: per GPU type, jobs in order of
    arrival, each on the first GPU free; run times drawn as the fake launcher draws them."""
    free: dict[str, list[float]] = {gpu: [0.0] * n for gpu, n in GPUS.items()}
    waits = []
    for s in submissions:
        for _ in range(2 if s.mode is Mode.LEADERBOARD else 1):
            start = max(s.at_s, heapq.heappop(free[s.gpu]))
            waits.append(start - s.at_s)
            took = RUN_S[s.mode] * rng.lognormvariate(0.0, RUN_SIGMA)
            heapq.heappush(free[s.gpu], start + took)
    return waits


async def serve(pool, launcher: FleetLauncher, stop: asyncio.Event) -> None:
    config = SchedulerConfig(poll_s=0.05, heartbeat_s=1.0, lease_s=30.0)
    schedulers = [
        Scheduler(pool, REGISTRY, {"fleet": launcher}, config=config) for _ in range(WORKERS)
    ]
    await asyncio.gather(*(s.run(stop) for s in schedulers))


async def drained(pool) -> None:
    open_jobs = "SELECT count(*) FROM jobs WHERE state IN ('queued', 'claimed', 'dispatched')"
    while await pool.fetchval(open_jobs):
        await asyncio.sleep(0.2)


@dataclass(frozen=True)
class Outcome:
    submissions: list[Arrival]
    took_s: float  # simulated, from the first arrival's start to the last result
    waits: list[tuple[str, float]]  # per job: its user, its simulated wait for a GPU


async def simulate(url: str) -> Outcome:
    rng = random.Random(2024)
    pool = await create_pool(url, max_size=30)
    launcher = FleetLauncher()
    stop = asyncio.Event()
    workers: asyncio.Task[None] | None = None
    try:
        service = Service(pool, REGISTRY)
        deadline = datetime.now(UTC) + timedelta(days=1)
        await service.leaderboards.create(
            "fleet", ghlib.tiny_task(), deadline, list(GPUS), rate_limit_per_hour=100_000
        )
        workers = asyncio.create_task(serve(pool, launcher, stop))
        submissions = plan(rng)
        began = time.monotonic()
        await submit_all(service, submissions)
        log(f"{len(submissions)} submissions in; draining")
        await drained(pool)
        took_s = (time.monotonic() - began) * SPEEDUP
        rows = await pool.fetch(
            """
            SELECT u.external_id AS user_name,
                   extract(epoch FROM j.claimed_at - j.created_at) AS wait_s
            FROM jobs j JOIN submissions s ON s.id = j.submission_id
            JOIN users u ON u.id = s.user_id
            """
        )
    finally:
        stop.set()
        if workers is not None:
            await asyncio.gather(workers, return_exceptions=True)
        await pool.close()
    waits = [(r["user_name"], float(r["wait_s"]) * SPEEDUP) for r in rows]
    return Outcome(submissions, took_s, waits)


def figures(outcome: Outcome) -> list[Figure]:
    waits = [wait for _, wait in outcome.waits]
    by_user: dict[str, list[float]] = {}
    for user, wait in outcome.waits:
        by_user.setdefault(user, []).append(wait)
    p95s = [percentile(w, 95) for w in by_user.values() if len(w) >= 5]
    submitted, took_s = len(outcome.submissions), outcome.took_s
    ideal = ideal_waits(outcome.submissions, random.Random(99))
    details = {
        "submissions": submitted,
        "jobs": len(waits),
        "simulated_min": round(took_s / 60, 1),
        "speedup": SPEEDUP,
        "gpus": GPUS,
        "workers": WORKERS,
        "wait_median_s": round(median(waits), 1),
        "users_ranked_for_fairness": len(p95s),
    }
    worst, typical = max(p95s), median(p95s)
    return [
        Figure("fleet_throughput_per_min", submitted / (took_s / 60), "/min", None, details),
        Figure(
            "fleet_queue_wait_p95_s",
            percentile(waits, 95),
            "s",
            None,
            {
                "ideal_p95_s": round(percentile(ideal, 95), 1),
                "ideal_median_s": round(median(ideal), 1),
            },
        ),
        Figure(
            "fleet_wait_p95_over_ideal",
            percentile(waits, 95) / max(percentile(ideal, 95), 1.0),
            "x",
            WAIT_OVER_IDEAL_TARGET,
        ),
        Figure(
            "fleet_user_wait_p95_ratio",
            worst / typical if typical > 0 else (1.0 if math.isclose(worst, 0.0) else math.inf),
            "x",
            FAIRNESS_TARGET,
            {"worst_user_p95_s": round(worst, 1), "median_user_p95_s": round(typical, 1)},
        ),
    ]


def main() -> int:
    try:
        with scratch_database("fleet") as url:
            found = figures(asyncio.run(simulate(url)))
    except Exception as exc:
        found = [
            Figure(name, None, unit, target, error=repr(exc))
            for name, unit, target in (
                ("fleet_throughput_per_min", "/min", None),
                ("fleet_queue_wait_p95_s", "s", None),
                ("fleet_wait_p95_over_ideal", "x", WAIT_OVER_IDEAL_TARGET),
                ("fleet_user_wait_p95_ratio", "x", FAIRNESS_TARGET),
            )
        ]
    return report(found)


if __name__ == "__main__":
    sys.exit(main())
