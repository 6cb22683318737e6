"""One job from its claim to its recorded result: the request, an idempotent dispatch, the
following through launcher errors, the result, or giving the attempt up.

The scheduler claims jobs, keeps their leases and runs one `JobDriver.drive` task per job; a
database outage in the middle resumes from what the database recorded, under the same lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import asyncpg
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.models import RunRequest, Verdict
from cluster_manager.core.phases import only_benchmark, run_timeout
from cluster_manager.core.progress import ProgressEvent, phase_started
from cluster_manager.core.records import (
    IN_FLIGHT_STATES,
    EventState,
    Job,
    JobEvent,
    JobState,
    dispatch_key,
)
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, RunHandle, RunState, RunTimedOutError
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.storage import installation as installation_store
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import submissions as sub_store
from cluster_manager.storage.database import DatabaseUnavailableError

log = logging.getLogger(__name__)


class JobDriver:
    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: GpuRegistry,
        launchers: Mapping[str, Launcher],
        config: SchedulerConfig,
        owner: str,
        installation: str | None = None,
    ) -> None:
        self.pool = pool
        self.registry = registry
        self.launchers = launchers
        self.config = config
        self.owner = owner
        # Carried in every dispatch key; read from the database when not given.
        self.installation = installation
        self._publishing: set[asyncio.Task[None]] = set()

    async def drive(self, job: Job) -> None:
        """Dispatches, follows and records one job claimed or adopted by the scheduler; its
        failures end here (recorded on the job), never in the scheduler."""
        resumable: Job | None = job
        while resumable is not None:
            job = resumable
            launcher: Launcher | None = None
            handle: RunHandle | None = None
            try:
                request = await self._request(job)
                launcher = self.launchers[self.registry.get(job.gpu).launcher]
                handle = await self._dispatch(job, launcher, request)
                # A job taken over keeps its first dispatch's time: its run started then.
                dispatched_at = job.dispatched_at or datetime.now(UTC)
                await self._publish(job, EventState.DISPATCHED, detail=launcher.name)
                await self._follow_and_record(job, launcher, handle, request, dispatched_at)
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
                given_up: JobState | None = None
                # If the database is gone too, the lease runs out and the job is adopted.
                with contextlib.suppress(DatabaseUnavailableError):
                    given_up = await self._give_up(job, f"{type(exc).__name__}: {exc}")
                if given_up is not None and launcher is not None and handle is not None:
                    await self._release_ended(launcher, handle)
                return

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
            task,
            submission.code,
            job.mode,
            limits,
            seed,
            arch=arch,
            profile=submission.profile,
            peaks=gpu.peaks,
        )

    async def _publish(
        self, job: Job, state: EventState, *, detail: str = "", verdict: str | None = None
    ) -> None:
        event = JobEvent(
            job.id, job.submission_id, job.gpu, job.secret, state, detail=detail, verdict=verdict
        )
        with contextlib.suppress(DatabaseUnavailableError):
            await job_store.publish(self.pool, event)

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
            if (
                fresh is None
                or fresh.state not in IN_FLIGHT_STATES
                or fresh.lease_owner != self.owner
            ):
                return None
            return fresh
        return None

    async def _dispatch(self, job: Job, launcher: Launcher, request: RunRequest) -> RunHandle:
        """Dispatches once per attempt; an adopted job with an external id is re-attached."""
        if job.external_id is not None:
            handle = launcher.attach(job.external_id)
            if job.state is JobState.DISPATCHED:
                log.info(
                    "job %s: re-attached to %s run %s", job.id, launcher.name, handle.external_id
                )
                return handle
            # Claimed with a key but maybe never dispatched: the same key is idempotent.
            states = await launcher.states([handle])
            if states.get(handle.external_id) is not RunState.LOST:
                await job_store.mark_dispatched(
                    self.pool, job_id=job.id, owner=self.owner, external_id=handle.external_id
                )
                log.info(
                    "job %s: re-attached to %s run %s", job.id, launcher.name, handle.external_id
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
        log.info(
            "job %s: dispatched to %s run %s on %s (attempt %d)",
            job.id,
            launcher.name,
            handle.external_id,
            job.gpu,
            job.attempts,
        )
        return handle

    async def _dispatch_key(self, job: Job) -> str:
        if self.installation is None:
            self.installation = await installation_store.installation_id(self.pool)
        return dispatch_key(self.installation, f"job-{job.id}-attempt-{job.attempts}")

    async def _follow_and_record(
        self,
        job: Job,
        launcher: Launcher,
        handle: RunHandle,
        request: RunRequest,
        dispatched_at: datetime,
    ) -> None:
        limit = run_timeout(request) - (datetime.now(UTC) - dispatched_at).total_seconds()

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
            lost = "the run was lost before it reported a result"
            if await self._give_up(job, lost) is not None:
                await self._release(launcher, handle)  # lost: nothing of it runs any more
            return
        seconds = (datetime.now(UTC) - dispatched_at).total_seconds()
        ending = asyncio.ensure_future(
            self._record_and_release(job, launcher, handle, result, seconds)
        )
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            # A scheduler stopping now still stores the result in hand and releases its run
            # (both short): left half done, the run's folder would outlive its result.
            await ending
            raise

    async def _record_and_release(
        self, job: Job, launcher: Launcher, handle: RunHandle, result: RunResult, seconds: float
    ) -> None:
        # Released only when this scheduler wrote the result: a job that another scheduler
        # took over meanwhile is still followed there, through what the run left.
        if await self._record(job, result, seconds):
            await self._release(launcher, handle)

    async def _release(self, launcher: Launcher, handle: RunHandle) -> None:
        """What the run left on the launcher's side (its request included) goes once the
        result is stored; a failure only leaves it to the launcher's sweep."""
        try:
            await launcher.release(handle)
        except LauncherError as exc:
            log.warning("could not release run %s: %s", handle.external_id, exc)

    async def _release_ended(self, launcher: Launcher, handle: RunHandle) -> None:
        """Releases a run given up on an error, once the launcher says it no longer runs
        (a run still going is left to the launcher's sweep)."""
        try:
            state = (await launcher.states([handle])).get(handle.external_id, RunState.LOST)
        except LauncherError as exc:
            log.warning("could not ask about run %s: %s", handle.external_id, exc)
            return
        if state not in (RunState.QUEUED, RunState.RUNNING):
            await self._release(launcher, handle)

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

    async def _record(self, job: Job, result: RunResult, seconds: float) -> bool:
        """Stores the result; False when this scheduler no longer holds the job."""
        async with self.pool.acquire() as conn:
            written = await run_store.record_run(
                conn,
                job=job,
                owner=self.owner,
                result=result,
                allow_unsandboxed=self.config.allow_unsandboxed_ranking,
                throttle_threshold=self.config.throttle_threshold,
            )
        if not written:
            log.info("job %s: its result was not recorded here: no longer its owner", job.id)
            return False
        log.info(
            "job %s: finished, %s, %.1f s after dispatch%s",
            job.id,
            result.verdict.value,
            seconds,
            " (secret run)" if job.secret else "",
        )
        # A secret run's message may quote its seed's inputs: subscribers get the verdict.
        detail = "" if job.secret else result.message
        await self._publish(job, EventState.FINISHED, verdict=result.verdict.value, detail=detail)
        return True

    async def _give_up(self, job: Job, error: str) -> JobState | None:
        """Queues the job again, or fails it after its last attempt: its new state, or None
        where this scheduler no longer holds it (the run is then its new owner's)."""
        fresh = await job_store.get_job(self.pool, job.id)
        attempts = fresh.attempts if fresh else job.attempts
        retry = attempts < self.config.max_attempts
        state = await job_store.release(
            self.pool, job_id=job.id, owner=self.owner, error=error, retry=retry
        )
        if state is None:
            log.info("job %s: given up (%s), but no longer its owner", job.id, error)
            return None
        outcome = "queued again" if state is JobState.QUEUED else "failed"
        log.warning(
            "job %s: attempt %d of %d %s: %s",
            job.id,
            attempts,
            self.config.max_attempts,
            outcome,
            error,
        )
        await self._publish(job, EventState.of(state), detail=error)
        return state
