"""The scheduler: claims queued jobs and drives each to its recorded result (scheduling.driver).

Several schedulers (processes) may run against one database. Each holds leases on the jobs it
drives and renews them with one heartbeat query; a scheduler that dies simply stops renewing,
and another takes its jobs over on its next pass: re-attaching by the external id recorded
before dispatch, so no job is dispatched twice and no result is written twice.

A scheduler that serves the whole queue also says, on the same heartbeat, which GPU types it
runs (storage.served); each fails the jobs left queued on a type that none has run for a
while, with why, instead of leaving them to wait for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Collection, Mapping

import asyncpg

from cluster_manager.core.gpus import LAUNCHER_SETTINGS, GpuRegistry
from cluster_manager.core.records import IN_FLIGHT_STATES, EventState, Job, JobEvent
from cluster_manager.core.waits import within
from cluster_manager.launchers.base import Launcher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.driver import JobDriver
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import served as served_store
from cluster_manager.storage import unserved
from cluster_manager.storage.database import DatabaseUnavailableError, listening

log = logging.getLogger(__name__)


def new_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Scheduler:
    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: GpuRegistry,
        launchers: Mapping[str, Launcher],
        *,
        config: SchedulerConfig | None = None,
        owner: str | None = None,
        submission_ids: set[int] | None = None,
        installation: str | None = None,
        gpus: Collection[str] | None = None,
    ) -> None:
        self.pool = pool
        self.registry = registry
        self.launchers = launchers
        self.config = config or SchedulerConfig()
        self.owner = owner or new_owner_id()
        # Serve only these submissions (the CLI's own); None serves the whole queue.
        self.submission_ids = submission_ids
        self.driver = JobDriver(
            pool, registry, launchers, self.config, self.owner, installation=installation
        )
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._taken_over: set[int] = set()  # orphans adopted from a dead scheduler
        self._wake = asyncio.Event()
        # GPU types this scheduler serves: those whose launcher it has (of `gpus`, if given).
        self.gpus = [g.name for g in registry.served_by(launchers, gpus)]
        # When this scheduler first found each GPU type with queued jobs and no server, on
        # every check since (loop time), and when it looks next.
        self._unserved_since: dict[str, float] = {}
        self._next_unserved_check = 0.0

    @property
    def whole_queue(self) -> bool:
        """Serves every submission's jobs (not only a CLI's own): says which types it runs,
        and fails the jobs nobody runs."""
        return self.submission_ids is None

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serves jobs until `stop` is set; in-flight jobs are then left to their leases."""
        stop = stop or asyncio.Event()
        async with listening(self.pool, job_store.NEW_JOBS_CHANNEL, self._on_new_jobs):
            with contextlib.suppress(DatabaseUnavailableError):  # the heartbeat says it again
                await self._register()
            heartbeat = asyncio.create_task(self._heartbeat_loop())
            try:
                while not stop.is_set():
                    # Cleared before the pass: a job finishing during it wakes the next one.
                    self._wake.clear()
                    try:
                        await self.step()
                    except DatabaseUnavailableError as exc:  # a database restart: try the next poll
                        log.warning("scheduler pass failed (will retry): %s", exc)
                    await within(self.config.poll_s, _first(self._wake.wait(), stop.wait()))
            finally:
                heartbeat.cancel()
                if self._tasks:
                    log.info(
                        "scheduler %s stopping with jobs %s in flight: their leases run out "
                        "and the next scheduler takes them over",
                        self.owner,
                        ", ".join(map(str, sorted(self._tasks))),
                    )
                for task in self._tasks.values():
                    task.cancel()
                await asyncio.gather(*self._tasks.values(), return_exceptions=True)
                with contextlib.suppress(DatabaseUnavailableError):  # else its rows age out
                    await self._unregister()

    async def run_until_idle(self, job_ids: set[int] | None = None) -> None:
        """Serves jobs until the given ones (or every job in flight here) are done."""
        stop = asyncio.Event()

        async def watch() -> None:
            while True:
                await asyncio.sleep(self.config.poll_s / 2)
                if job_ids is None:
                    if not self._tasks and await self._queue_empty():
                        break
                elif not self._busy(job_ids) and await self._all_terminal(job_ids):
                    break
            stop.set()

        watcher = asyncio.create_task(watch())
        try:
            await self.run(stop)
        finally:
            watcher.cancel()

    async def step(self) -> None:
        """One pass: adopt orphaned jobs, then claim what the GPUs have room for. A CLI
        serving its own submission adopts too: with no worker running, an orphan left by a
        dead `submit` would otherwise hold its GPU type's slot for good."""
        adopted = await job_store.take_over_expired(
            self.pool, owner=self.owner, lease_s=self.config.lease_s, gpus=self.gpus
        )
        for job, previous_owner in adopted:
            log.info(
                "job %s: taken over from scheduler %s, which stopped renewing its lease",
                job.id,
                previous_owner,
            )
            self._taken_over.add(job.id)
            self._start(job)
        for gpu in self.gpus:
            gpu_type = self.registry.get(gpu)
            claimed = await job_store.claim(
                self.pool,
                owner=self.owner,
                gpu=gpu,
                max_active=gpu_type.max_concurrent,
                lease_s=self.config.lease_s,
                limit=gpu_type.max_concurrent,
                submission_ids=self.submission_ids,
            )
            for job in claimed:
                self._start(job)
        if self.whole_queue:
            await self._fail_unserved()

    async def _fail_unserved(self) -> None:
        """Fails the jobs queued for over the window on a GPU type that no scheduler has run
        for as long, as seen on every check of this one for a whole window too: a scheduler
        that stops cleanly removes its rows, and its restart must fail nothing. Cheap and at
        most every `unserved_check_s`."""
        now = asyncio.get_running_loop().time()
        if now < self._next_unserved_check:
            return
        self._next_unserved_check = now + self.config.unserved_check_s
        window = self.config.served_window_s
        found = await unserved.queued_gpus(self.pool, window_s=window, served=self.gpus)
        self._unserved_since = {gpu: self._unserved_since.get(gpu, now) for gpu in found}
        for gpu, since in self._unserved_since.items():
            if now - since < window:
                continue
            error = unserved_error(self.registry, gpu, window)
            for job in await unserved.fail_jobs(self.pool, gpu=gpu, error=error, window_s=window):
                log.warning("job %s: failed, nothing serves %s", job.id, gpu)
                event = JobEvent(
                    job.id, job.submission_id, job.gpu, job.secret, EventState.FAILED, detail=error
                )
                with contextlib.suppress(DatabaseUnavailableError):
                    await job_store.publish(self.pool, event)

    async def _register(self) -> None:
        if self.whole_queue and self.gpus:
            await served_store.register(self.pool, self.owner, self.gpus)

    async def _unregister(self) -> None:
        if self.whole_queue and self.gpus:
            await served_store.unregister(self.pool, self.owner)

    def _start(self, job: Job) -> None:
        if job.id in self._tasks:
            return
        task = asyncio.create_task(self.driver.drive(job), name=f"job-{job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(functools.partial(self._finished, job.id))

    def _finished(self, job_id: int, _task: object = None) -> None:
        self._tasks.pop(job_id, None)
        self._wake.set()  # a slot is free: claim the next job now, not at the next poll

    def _on_new_jobs(self, *_args: object) -> None:
        self._wake.set()

    async def _heartbeat_loop(self) -> None:
        # Often enough that this scheduler's GPU types never look unserved to the others.
        interval = min(self.config.heartbeat_s, self.config.served_window_s / 3)
        while True:
            await asyncio.sleep(interval)
            # Only these: a job started while the renewal is under way was not asked about.
            asked = set(self._tasks)
            try:
                await self._register()
                held = await job_store.renew_leases(
                    self.pool, owner=self.owner, job_ids=list(asked), lease_s=self.config.lease_s
                )
            except DatabaseUnavailableError as exc:
                log.warning("heartbeat failed (will retry): %s", exc)
                continue
            for job_id in asked - held:
                if job_id not in self._tasks:
                    continue  # its task has ended meanwhile
                with contextlib.suppress(DatabaseUnavailableError):
                    job = await job_store.get_job(self.pool, job_id)
                    ours = job is not None and job.lease_owner == self.owner
                    # Not held because it just ended: let its task publish that.
                    if job is not None and (job.state not in IN_FLIGHT_STATES or ours):
                        continue
                    # Another scheduler owns it now: stop following, it will record the result.
                    log.warning("job %s: lease lost; leaving it to its new owner", job_id)
                    self._tasks[job_id].cancel()

    def _busy(self, job_ids: set[int]) -> bool:
        """Whether a CLI's scheduler must drive jobs on before it stops: `job_ids` (stored,
        their run not yet released), orphans taken over (else orphaned again), and with a
        submission filter any job of those submissions (a throttle retry)."""
        driven = self._tasks.keys()
        return bool(driven if self.submission_ids else driven & (job_ids | self._taken_over))

    async def _queue_empty(self) -> bool:
        return await job_store.queued_count(self.pool, self.gpus) == 0

    async def _all_terminal(self, job_ids: set[int]) -> bool:
        # A served submission's jobs queued meanwhile (a throttle retry) are waited for too.
        served = self.submission_ids or ()
        return await job_store.open_count(self.pool, job_ids, served) == 0


def unserved_error(registry: GpuRegistry, gpu: str, window_s: float) -> str:
    """Why a job queued on `gpu` was given up: nothing runs it, and what would."""
    gpu_type = registry.types.get(gpu)
    if gpu_type is None:
        what = "it is not in this deployment's GPU registry"
    else:
        what = f"its launcher: {gpu_type.launcher}"
        if setting := LAUNCHER_SETTINGS.get(gpu_type.launcher):
            what += f", which a server runs with {setting} set"
    return (
        f"no server of this deployment runs {gpu} jobs ({what}); none has for {window_s:g} s, "
        "so this job was not run: submit again once one does"
    )


async def _first(*awaitables: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
