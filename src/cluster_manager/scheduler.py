"""The scheduler: claims queued jobs, dispatches them to launchers, follows them, records results.

Several schedulers (processes) may run against one database. Each holds leases on the jobs it
drives and renews them with one heartbeat query; a scheduler that dies simply stops renewing,
and another takes its jobs over on its next pass: re-attaching by the external id recorded
before dispatch, so no job is dispatched twice and no result is written twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from cluster_manager.core.models import Limits, RunRequest, RunResult, Verdict
from cluster_manager.core.plan import only_benchmark, run_timeout
from cluster_manager.core.progress import ProgressEvent, phase_started
from cluster_manager.core.records import EventState, Job, JobEvent, JobState, dispatch_key
from cluster_manager.errors import LauncherError
from cluster_manager.gpus import GpuRegistry
from cluster_manager.launchers.base import Launcher, RunHandle, RunState, RunTimedOutError
from cluster_manager.storage import installation as installation_store
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import submissions as sub_store
from cluster_manager.storage.database import DatabaseUnavailableError, listening

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchedulerConfig:
    lease_s: float = 30.0
    heartbeat_s: float = 10.0
    poll_s: float = 1.0
    max_attempts: int = 3
    # Tries at following one dispatched run through launcher errors before giving it up.
    follow_attempts: int = 3
    limits: Limits = field(default_factory=Limits)
    # Rank scores of runs that were not fully sandboxed (core.sandboxing); off by default.
    allow_unsandboxed_ranking: bool = False
    throttle_threshold: float = run_store.DEFAULT_THROTTLE_THRESHOLD  # storage.throttling


IN_FLIGHT = (JobState.CLAIMED, JobState.DISPATCHED)  # states a lease covers


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
        # Carried in every dispatch key; read from the database when not given.
        self.installation = installation
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._taken_over: set[int] = set()  # orphans adopted from a dead scheduler
        self._publishing: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        # GPU types this scheduler serves: those whose launcher it has (of `gpus`, if given).
        self.gpus = [g.name for g in registry.served_by(launchers, gpus)]

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serves jobs until `stop` is set; in-flight jobs are then left to their leases."""
        stop = stop or asyncio.Event()
        async with listening(self.pool, job_store.NEW_JOBS_CHANNEL, self._on_new_jobs):
            heartbeat = asyncio.create_task(self._heartbeat_loop())
            try:
                while not stop.is_set():
                    # Cleared before the pass: a job finishing during it wakes the next one.
                    self._wake.clear()
                    try:
                        await self.step()
                    except DatabaseUnavailableError as exc:  # a database restart: try the next poll
                        log.warning("scheduler pass failed (will retry): %s", exc)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            _first(self._wake.wait(), stop.wait()), timeout=self.config.poll_s
                        )
            finally:
                heartbeat.cancel()
                for task in self._tasks.values():
                    task.cancel()
                await asyncio.gather(*self._tasks.values(), return_exceptions=True)

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
        for job in adopted:
            log.info("job %s: taken over from a scheduler that stopped renewing", job.id)
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

    def _start(self, job: Job) -> None:
        if job.id in self._tasks:
            return
        task = asyncio.create_task(self._drive(job), name=f"job-{job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(functools.partial(self._finished, job.id))

    def _finished(self, job_id: int, _task: object = None) -> None:
        self._tasks.pop(job_id, None)
        self._wake.set()  # a slot is free: claim the next job now, not at the next poll

    def _on_new_jobs(self, *_args: object) -> None:
        self._wake.set()

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_s)
            # Only these: a job started while the renewal is under way was not asked about.
            asked = set(self._tasks)
            try:
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
                    if job is not None and (job.state not in IN_FLIGHT or ours):
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

    # --- one job ----------------------------------------------------------------------------

    async def _request(self, job: Job) -> RunRequest:
        submission = await sub_store.get_submission(self.pool, job.submission_id)
        if submission is None:
            raise LauncherError(f"submission {job.submission_id} disappeared")
        board = await lb_store.get_leaderboard_by_id(self.pool, submission.leaderboard_id)
        if board is None:
            raise LauncherError(f"leaderboard of submission {job.submission_id} disappeared")
        seed = await lb_store.secret_seed(self.pool, board.id) if job.secret else None
        gpu = self.registry.get(job.gpu)
        limits, arch = gpu.run_limits(self.config.limits), gpu.arch
        task = only_benchmark(board.task, submission.profile_benchmark)  # profile mode's choice
        return RunRequest.of_submission(
            task, submission.code, job.mode, limits, seed, arch=arch, profile=submission.profile
        )

    async def _publish(
        self, job: Job, state: EventState, *, detail: str = "", verdict: str | None = None
    ) -> None:
        event = JobEvent(
            job.id, job.submission_id, job.gpu, job.secret, state, detail=detail, verdict=verdict
        )
        with contextlib.suppress(DatabaseUnavailableError):
            await job_store.publish(self.pool, event)

    async def _drive(self, job: Job) -> None:
        resumable: Job | None = job
        while resumable is not None:
            job = resumable
            try:
                request = await self._request(job)
                launcher = self.launchers[self.registry.get(job.gpu).launcher]
                handle = await self._dispatch(job, launcher, request)
                await self._publish(job, EventState.DISPATCHED, detail=launcher.name)
                await self._follow_and_record(job, launcher, handle, request)
                return
            except asyncio.CancelledError:
                raise
            except DatabaseUnavailableError as exc:
                # The database went away (a restart, say): the job is still ours under its
                # lease. Carry on from what the database recorded once it answers again.
                log.warning("job %s: database unavailable (%s); resuming", job.id, exc)
                resumable = await self._resume_point(job)
            except Exception as exc:  # one job's failure must never stop the scheduler
                log.exception("job %s failed", job.id)
                # If the database is gone too, the lease runs out and the job is adopted.
                with contextlib.suppress(DatabaseUnavailableError):
                    await self._give_up(job, f"{type(exc).__name__}: {exc}")
                return

    async def _resume_point(self, job: Job) -> Job | None:
        """The job as last recorded, while it is still ours and in flight; None otherwise
        (finished, given to another owner, or the database away for a whole lease)."""
        deadline = asyncio.get_running_loop().time() + self.config.lease_s
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(self.config.poll_s)
            try:
                fresh = await job_store.get_job(self.pool, job.id)
            except DatabaseUnavailableError:
                continue
            if fresh is None or fresh.state not in IN_FLIGHT or fresh.lease_owner != self.owner:
                return None
            return fresh
        return None

    async def _dispatch(self, job: Job, launcher: Launcher, request: RunRequest) -> RunHandle:
        """Dispatches once per attempt; an adopted job with an external id is re-attached."""
        if job.external_id is not None:
            handle = launcher.attach(job.external_id)
            if job.state is JobState.DISPATCHED:
                return handle
            # Claimed with a key but maybe never dispatched: the same key is idempotent.
            states = await launcher.states([handle])
            if states.get(handle.external_id) is not RunState.LOST:
                await job_store.mark_dispatched(
                    self.pool, job_id=job.id, owner=self.owner, external_id=handle.external_id
                )
                return handle
        key = job.external_id or await self._dispatch_key(job)
        if job.external_id is None and not await job_store.set_external_id(
            self.pool, job_id=job.id, owner=self.owner, launcher=launcher.name, external_id=key
        ):
            raise LauncherError("lost the job's lease before dispatching it")
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(LauncherError),
            stop=stop_after_attempt(3),
            wait=wait_exponential(multiplier=0.5, max=5),
            reraise=True,
        ):
            with attempt:
                handle = await launcher.submit(request, key, gpu=self.registry.get(job.gpu))
        await job_store.mark_dispatched(
            self.pool, job_id=job.id, owner=self.owner, external_id=handle.external_id
        )
        return handle

    async def _dispatch_key(self, job: Job) -> str:
        if self.installation is None:
            self.installation = await installation_store.installation_id(self.pool)
        return dispatch_key(self.installation, f"job-{job.id}-attempt-{job.attempts}")

    async def _follow_and_record(
        self, job: Job, launcher: Launcher, handle: RunHandle, request: RunRequest
    ) -> None:
        limit = run_timeout(request)
        if job.dispatched_at is not None:
            limit -= (datetime.now(UTC) - job.dispatched_at).total_seconds()

        def on_progress(event: ProgressEvent) -> None:
            if detail := phase_started(event):
                # Keep a reference: the loop holds tasks only weakly.
                task = asyncio.get_running_loop().create_task(
                    self._publish(job, EventState.RUNNING, detail=detail)
                )
                self._publishing.add(task)
                task.add_done_callback(self._publishing.discard)

        try:
            result = await self._follow(launcher, handle, max(limit, 1.0), on_progress)
        except RunTimedOutError as exc:
            result = RunResult(
                passed=False, verdict=Verdict.TIMEOUT, mode=request.mode, message=str(exc)
            )
        if result is None:
            await self._give_up(job, "the run was lost before it reported a result")
            return
        await self._record(job, result)
        await self._release(launcher, handle)

    async def _release(self, launcher: Launcher, handle: RunHandle) -> None:
        """What the run left on the launcher's side (its request included) goes once the
        result is stored; a failure only leaves it to the launcher's sweep."""
        try:
            await launcher.release(handle)
        except LauncherError as exc:
            log.warning("could not release run %s: %s", handle.external_id, exc)

    async def _follow(
        self,
        launcher: Launcher,
        handle: RunHandle,
        timeout: float,
        on_progress: Callable[[ProgressEvent], None],
    ) -> RunResult | None:
        """Follows the dispatched run; a launcher error (an artifact that failed to download,
        say) is retried on the same run: the run may have finished, and dispatching it again
        would run the submission twice."""
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(LauncherError)
            & retry_if_not_exception_type(RunTimedOutError),
            stop=stop_after_attempt(self.config.follow_attempts),
            wait=wait_exponential(multiplier=self.config.poll_s, max=30),
            reraise=True,
        ):
            with attempt:
                return await launcher.follow(handle, timeout=timeout, on_progress=on_progress)
        return None  # not reached: the last attempt returns or raises

    async def _record(self, job: Job, result: RunResult) -> None:
        async with self.pool.acquire() as conn:
            written = await run_store.record_run(
                conn,
                job=job,
                owner=self.owner,
                result=result,
                allow_unsandboxed=self.config.allow_unsandboxed_ranking,
                throttle_threshold=self.config.throttle_threshold,
            )
        if written:
            # A secret run's message may quote its seed's inputs: subscribers get the verdict.
            detail = "" if job.secret else result.message
            await self._publish(
                job, EventState.FINISHED, verdict=result.verdict.value, detail=detail
            )

    async def _give_up(self, job: Job, error: str) -> None:
        fresh = await job_store.get_job(self.pool, job.id)
        attempts = fresh.attempts if fresh else job.attempts
        retry = attempts < self.config.max_attempts
        state = await job_store.release(
            self.pool, job_id=job.id, owner=self.owner, error=error, retry=retry
        )
        if state is None:
            return
        await self._publish(job, EventState.of(state), detail=error)


async def _first(*awaitables: Awaitable[object]) -> None:
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
