"""The application service: the only thing front ends (CLI, Discord) call.

It validates, enforces the rules (names, deadlines, GPUs, rate limits, who may read what),
stores, enqueues jobs and publishes their progress. SQL lives in `storage/`; running jobs is
the scheduler's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

from cluster_manager import quick_run
from cluster_manager.core.models import Limits, Mode, RunRequest, RunResult, Task
from cluster_manager.core.plan import longest_run_s
from cluster_manager.core.protocol import new_secret_seed
from cluster_manager.core.records import (
    EventState,
    Job,
    JobEvent,
    JobState,
    Leaderboard,
    LeaderboardSummary,
    Placement,
    RankingEntry,
    RunRecord,
    check_leaderboard_name,
    dispatch_key,
)
from cluster_manager.core.submission import MAX_SUBMISSION_BYTES, validate_submission
from cluster_manager.errors import ClusterManagerError
from cluster_manager.gpus import GpuRegistry, GpuType
from cluster_manager.launchers.base import Launcher, ProgressCallback
from cluster_manager.storage import installation as installation_store
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import scripts as script_store
from cluster_manager.storage import submissions as sub_store
from cluster_manager.storage.database import DatabaseUnavailableError, listening
from cluster_manager.storage.submissions import StoredSubmission

DEFAULT_RATE_LIMIT_PER_HOUR = 30
DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR = 10
# A script's slot lapses this long after its holder stops renewing it (the bot died).
SCRIPT_LEASE_S = 30.0
SCRIPT_SLOT_POLL_S = 1.0
TERMINAL_STATES = {JobState.FINISHED, JobState.FAILED}
TERMINAL_EVENTS = {EventState.of(state) for state in TERMINAL_STATES}


class NotFoundError(ClusterManagerError):
    pass


class AlreadyExistsError(ClusterManagerError):
    pass


class DeadlinePassedError(ClusterManagerError):
    pass


class GpuNotAllowedError(ClusterManagerError):
    pass


class PermissionDeniedError(ClusterManagerError):
    pass


class InvalidDeadlineError(ClusterManagerError):
    pass


class RateLimitedError(ClusterManagerError):
    def __init__(self, message: str, retry_after: timedelta) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GpuBusyError(ClusterManagerError):
    """Every slot of a GPU type stayed taken for as long as a script run may wait."""


@dataclass(frozen=True)
class Submitter:
    """Who acts: a stable id from the front end (Discord id, CLI user name) and a name."""

    external_id: str
    name: str


@dataclass(frozen=True)
class SubmissionReceipt:
    submission_id: int
    leaderboard: str
    user: str
    file_name: str
    mode: Mode
    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class SubmissionReport:
    submission: StoredSubmission
    jobs: tuple[Job, ...]
    runs: tuple[RunRecord, ...]  # secret runs carry no result details

    @property
    def done(self) -> bool:
        return all(j.state in TERMINAL_STATES for j in self.jobs)

    @property
    def passed(self) -> bool:
        """Every job has its run and every run passed (a failed job has no run)."""
        runs = self.runs
        return bool(runs) and len(runs) == len(self.jobs) and all(r.passed for r in runs)


# Postgres's timestamptz and Python's datetime both end before year 10000, in every zone.
LATEST_DEADLINE_YEAR = 9998


def parse_deadline(raw: str) -> datetime:
    """ISO 8601; a deadline without a time zone is taken as UTC."""
    try:
        deadline = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise InvalidDeadlineError(
            f"cannot read deadline {raw!r}: use ISO 8601, e.g. 2026-12-31T23:59:00+00:00"
        ) from None
    deadline = deadline if deadline.tzinfo else deadline.replace(tzinfo=UTC)
    try:
        in_utc = deadline.astimezone(UTC)
    except OverflowError:
        in_utc = None
    if in_utc is None or in_utc.year > LATEST_DEADLINE_YEAR:
        raise InvalidDeadlineError(
            f"deadline {raw!r} is too far away: the latest is the end of {LATEST_DEADLINE_YEAR}"
        )
    return deadline


def _check_run_fits(task: Task, gpu: GpuType) -> None:
    """A task whose runs may outlast what the GPU type's launcher allows would end as the
    launcher's cancellation, not a timeout verdict: refused up front, with the limit named."""
    limit = gpu.max_run_s
    longest = longest_run_s(task, gpu.run_limits(Limits()))
    if limit is not None and longest > limit:
        raise GpuNotAllowedError(
            f"{gpu.name}: a run of this task may take {longest / 60:.0f} min (its phases' "
            f"timeouts, grace and start-up), over the {limit / 60:.0f} min the {gpu.launcher} "
            "launcher allows; lower test_timeout, benchmark_timeout or ranked_timeout"
        )


def _rate_window() -> timedelta:
    return timedelta(hours=1)


class Service:
    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: GpuRegistry,
        *,
        default_rate_limit_per_hour: int = DEFAULT_RATE_LIMIT_PER_HOUR,
        script_rate_limit_per_hour: int = DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR,
        script_wait_s: float = 300.0,
        max_submission_bytes: int = MAX_SUBMISSION_BYTES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        installation: str | None = None,
    ) -> None:
        self.pool = pool
        self.registry = registry
        self.default_rate_limit = default_rate_limit_per_hour
        self.script_rate_limit = script_rate_limit_per_hour
        # How long a script run waits for a free slot of its GPU type before giving up.
        self.script_wait_s = script_wait_s
        # Carried in script runs' dispatch keys; read from the database when not given.
        self._installation = installation
        self.max_submission_bytes = max_submission_bytes
        self.clock = clock

    # --- leaderboards -------------------------------------------------------------------------

    async def create_leaderboard(
        self,
        name: str,
        task: Task,
        deadline: datetime,
        gpus: Sequence[str],
        *,
        creator: Submitter | None = None,
        rate_limit_per_hour: int | None = None,
    ) -> Leaderboard:
        check_leaderboard_name(name)
        if deadline.tzinfo is None:
            raise InvalidDeadlineError("the deadline needs a time zone")
        if deadline <= self.clock():
            raise InvalidDeadlineError(f"the deadline {deadline.isoformat()} has already passed")
        if not gpus:
            raise GpuNotAllowedError("a leaderboard needs at least one GPU type")
        for gpu in gpus:
            _check_run_fits(task, self.registry.get(gpu))
        if len(set(gpus)) != len(gpus):
            raise GpuNotAllowedError(f"GPU types listed twice: {sorted(gpus)}")
        if rate_limit_per_hour is not None and rate_limit_per_hour <= 0:
            raise ClusterManagerError("the rate limit must be a positive number per hour")
        async with self.pool.acquire() as conn, conn.transaction():
            creator_id = None
            if creator is not None:
                creator_id = (
                    await lb_store.upsert_user(conn, creator.external_id, creator.name)
                ).id
            leaderboard_id = await lb_store.insert_leaderboard(
                conn,
                name=name,
                deadline=deadline,
                task=task,
                gpus=tuple(gpus),
                creator_id=creator_id,
                secret_seed=new_secret_seed(),
                rate_limit_per_hour=rate_limit_per_hour,
            )
            if leaderboard_id is None:
                raise AlreadyExistsError(f"a leaderboard named {name!r} already exists")
        return await self.leaderboard(name)

    async def leaderboard(self, name: str) -> Leaderboard:
        found = await lb_store.get_leaderboard(self.pool, name)
        if found is None:
            raise NotFoundError(f"there is no leaderboard named {name!r}")
        return found

    async def list_leaderboards(self) -> list[LeaderboardSummary]:
        return await lb_store.list_leaderboards(self.pool)

    async def leaderboard_names(self, prefix: str = "") -> list[str]:
        return await lb_store.leaderboard_names(self.pool, prefix)

    async def delete_leaderboard(
        self, name: str, *, actor: Submitter | None = None, admin: bool = True
    ) -> None:
        """Deletes it with all its submissions. Non-admins may delete only what they created."""
        board = await self.leaderboard(name)
        check_may_delete(board, actor, admin=admin)
        async with self.pool.acquire() as conn, conn.transaction():
            await lb_store.delete_leaderboard(conn, board.id)

    async def ranking(
        self, name: str, gpu: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> dict[str, list[RankingEntry]]:
        board = await self.leaderboard(name)
        if gpu is not None and gpu not in board.gpus:
            raise GpuNotAllowedError(
                f"{name!r} does not run on {gpu!r} (it runs on {', '.join(board.gpus)})"
            )
        gpus = [gpu] if gpu is not None else list(board.gpus)
        return {
            g: await run_store.ranking(
                self.pool, leaderboard_id=board.id, gpu=g, limit=limit, offset=offset
            )
            for g in gpus
        }

    async def personal_runs(self, name: str, user: Submitter) -> list[RunRecord]:
        """All of one user's runs; secret runs show only their verdict."""
        board = await self.leaderboard(name)
        found = await lb_store.get_user(self.pool, user.external_id)
        if found is None:
            return []
        runs = await run_store.runs_of_user(self.pool, leaderboard_id=board.id, user_id=found.id)
        return [_redact(r) for r in runs]

    async def task_files(self, name: str) -> dict[str, str]:
        """The files a participant may read (the submission slot is theirs to write)."""
        board = await self.leaderboard(name)
        return {f.name: f.content for f in board.task.files if f.content is not None}

    async def templates(self, name: str) -> dict[str, str]:
        return dict((await self.leaderboard(name)).task.templates)

    # --- submissions --------------------------------------------------------------------------

    async def submit(
        self,
        leaderboard: str,
        user: Submitter,
        file_name: str,
        data: bytes,
        *,
        gpus: Sequence[str] | None = None,
        mode: Mode = Mode.LEADERBOARD,
    ) -> SubmissionReceipt:
        board = await self.leaderboard(leaderboard)
        now = self.clock()
        if not board.is_open(now):
            raise DeadlinePassedError(
                f"the deadline of {board.name!r} passed at {board.deadline.isoformat()}"
            )
        submission = validate_submission(
            file_name, data, board.task.lang, max_bytes=self.max_submission_bytes
        )
        chosen = self._choose_gpus(board, gpus or ([submission.gpu] if submission.gpu else None))
        specs: list[tuple[str, Mode, bool]] = []
        for gpu in chosen:
            specs.append((gpu, mode, False))
            if mode is Mode.LEADERBOARD:
                specs.append((gpu, mode, True))  # the secret re-run that guards the ranking
        limit = board.rate_limit_per_hour or self.default_rate_limit
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await sub_store.lock_submitter(conn, user_id=found.id, leaderboard_id=board.id)
            recent = await sub_store.submissions_since(
                conn, user_id=found.id, leaderboard_id=board.id, since=now - _rate_window()
            )
            if len(recent) >= limit:
                wait = recent[0] + _rate_window() - now
                seconds = max(1, int(wait.total_seconds()) + 1)
                raise RateLimitedError(
                    f"rate limit: {limit} submissions per hour on {board.name!r}; "
                    f"try again in {_human(seconds)}",
                    timedelta(seconds=seconds),
                )
            submission_id, _ = await sub_store.insert_submission(
                conn,
                leaderboard_id=board.id,
                user_id=found.id,
                file_name=submission.file_name,
                code=submission.code,
                mode=mode,
                submitted_at=now,  # the rate limit counts on the same clock
            )
            jobs = await job_store.enqueue(conn, submission_id, specs)
        for job in jobs:
            position = await job_store.queue_position(self.pool, job.id)
            await job_store.publish(
                self.pool,
                JobEvent.of_job(job, position=position),
            )
        return SubmissionReceipt(
            submission_id, board.name, user.external_id, submission.file_name, mode, tuple(jobs)
        )

    def _choose_gpus(self, board: Leaderboard, gpus: Sequence[str] | None) -> list[str]:
        if not gpus:
            if len(board.gpus) == 1:
                return [board.gpus[0]]
            raise GpuNotAllowedError(
                f"{board.name!r} runs on several GPUs; choose from {', '.join(board.gpus)}"
            )
        for gpu in gpus:
            if gpu not in board.gpus:
                raise GpuNotAllowedError(
                    f"{board.name!r} does not run on {gpu!r}; choose from {', '.join(board.gpus)}"
                )
        return list(dict.fromkeys(gpus))

    async def submission_code(self, submission_id: int, user: Submitter) -> tuple[str, str]:
        """(file name, code) of a submission; only its author may read it."""
        found = await sub_store.get_submission(self.pool, submission_id)
        if found is None:
            raise NotFoundError(f"there is no submission {submission_id}")
        if found.user != user.external_id:
            raise PermissionDeniedError("you can only read your own submissions")
        return found.file_name, found.code

    async def report(self, submission_id: int) -> SubmissionReport:
        found = await sub_store.get_submission(self.pool, submission_id)
        if found is None:
            raise NotFoundError(f"there is no submission {submission_id}")
        jobs = await job_store.jobs_of_submission(self.pool, submission_id)
        runs = await run_store.runs_of_submission(self.pool, submission_id)
        return SubmissionReport(found, tuple(jobs), tuple(_redact(r) for r in runs))

    async def placements(self, submission_id: int) -> list[Placement]:
        """Where a ranked submission stands on each GPU, and whether it is the user's best."""
        found = await sub_store.get_submission(self.pool, submission_id)
        if found is None:
            raise NotFoundError(f"there is no submission {submission_id}")
        runs = await run_store.runs_of_submission(self.pool, submission_id)
        placements = []
        for gpu in sorted({r.gpu for r in runs if r.mode is Mode.LEADERBOARD}):
            public = next((r for r in runs if r.gpu == gpu and not r.secret), None)
            standing = await run_store.rank_of(
                self.pool, leaderboard_id=found.leaderboard_id, gpu=gpu, user_id=found.user_id
            )
            improved = standing is not None and standing[2] == submission_id
            placements.append(
                Placement(
                    gpu=gpu,
                    rank=standing[0] if standing else None,
                    score=public.score if public else None,
                    improved=improved,
                    previous_best=None if improved or standing is None else standing[1],
                )
            )
        return placements

    # --- quick script runs ----------------------------------------------------------------------

    async def run_script(
        self,
        user: Submitter,
        gpu: str,
        request: RunRequest,
        launchers: Mapping[str, Launcher],
        *,
        on_state: Callable[[str], Awaitable[None]] | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> RunResult:
        """Runs a script (`/run`) once the user is under their hourly limit and the GPU type
        has a free slot: scripts and queued jobs share its concurrency. `on_state` hears
        "waiting" (for a slot) and "running"."""
        gpu_type = self.registry.get(gpu)
        quick_run.launcher_for(self.registry, launchers, gpu)  # refused before it counts
        script_id = await self._script_slot(user, gpu_type, on_state)
        async with self._holding_slot(script_id):
            if on_state is not None:
                await on_state("running")
            key = dispatch_key(await self._installation_id(), f"script-{uuid.uuid4().hex}")
            return await quick_run.run_script(
                self.registry, launchers, gpu, request, key=key, on_progress=on_progress
            )

    async def _script_slot(
        self, user: Submitter, gpu: GpuType, on_state: Callable[[str], Awaitable[None]] | None
    ) -> int:
        """Waits for a free slot of `gpu` (up to `script_wait_s`); the slot's id."""
        deadline = time.monotonic() + self.script_wait_s
        waiting = False
        while True:
            script_id = await self._try_script_slot(user, gpu)
            if script_id is not None:
                return script_id
            if on_state is not None and not waiting:
                await on_state("waiting")
            waiting = True
            if time.monotonic() >= deadline:
                raise GpuBusyError(
                    f"all {gpu.max_concurrent} slot(s) of {gpu.name} stayed busy for "
                    f"{_human(int(self.script_wait_s))}; try again later"
                )
            await asyncio.sleep(SCRIPT_SLOT_POLL_S)

    async def _try_script_slot(self, user: Submitter, gpu: GpuType) -> int | None:
        now = self.clock()
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await script_store.lock_user(conn, found.id)
            recent = await script_store.started_since(
                conn, user_id=found.id, since=now - _rate_window()
            )
            if len(recent) >= self.script_rate_limit:
                seconds = max(1, int((recent[0] + _rate_window() - now).total_seconds()) + 1)
                raise RateLimitedError(
                    f"rate limit: {self.script_rate_limit} script runs per hour; "
                    f"try again in {_human(seconds)}",
                    timedelta(seconds=seconds),
                )
            return await script_store.take_slot(
                conn,
                user_id=found.id,
                gpu=gpu.name,
                max_active=gpu.max_concurrent,
                lease_s=SCRIPT_LEASE_S,
                started_at=now,
            )

    @contextlib.asynccontextmanager
    async def _holding_slot(self, script_id: int) -> AsyncIterator[None]:
        """Renews the slot's lease while the script runs; frees the slot when it ends."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(SCRIPT_LEASE_S / 3)
                with contextlib.suppress(DatabaseUnavailableError):
                    await script_store.renew_slot(self.pool, script_id, lease_s=SCRIPT_LEASE_S)

        renewing = asyncio.create_task(renew())
        try:
            yield
        finally:
            renewing.cancel()
            # If the database is away, the lease lapses on its own.
            with contextlib.suppress(DatabaseUnavailableError):
                await script_store.release_slot(self.pool, script_id)

    async def _installation_id(self) -> str:
        if self._installation is None:
            self._installation = await installation_store.installation_id(self.pool)
        return self._installation

    async def watch(self, *submission_ids: int) -> AsyncIterator[JobEvent]:
        """Live transitions of these submissions' jobs, from their current state until all
        are done. One connection listens, however many submissions are watched."""
        wanted = set(submission_ids)
        events: asyncio.Queue[JobEvent] = asyncio.Queue()

        def on_notify(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            with contextlib.suppress(ValueError, TypeError):
                event = JobEvent.from_json(json.loads(payload))
                if event.submission_id in wanted:
                    events.put_nowait(event)

        async def current_jobs(conn: asyncpg.Connection) -> list[Job]:
            found = []
            for submission_id in sorted(wanted):
                found += await job_store.jobs_of_submission(conn, submission_id)
            return found

        async with listening(self.pool, job_store.EVENTS_CHANNEL, on_notify) as conn:
            # Listen first, then read the state: nothing happens unseen in between.
            jobs = await current_jobs(conn)
            if not jobs:
                raise NotFoundError(f"there is no submission {sorted(wanted)}")
            open_jobs = {j.id for j in jobs if j.state not in TERMINAL_STATES}
            for job in jobs:
                yield await _snapshot_event(conn, job)
            while open_jobs:
                try:
                    event = await asyncio.wait_for(events.get(), timeout=5)
                except TimeoutError:
                    # A missed notification (connection blip) must not hang us: re-read.
                    for job in await current_jobs(conn):
                        if job.id in open_jobs and job.state in TERMINAL_STATES:
                            open_jobs.discard(job.id)
                            yield await _snapshot_event(conn, job)
                    continue
                if event.state in TERMINAL_EVENTS and event.job_id in open_jobs:
                    open_jobs.discard(event.job_id)
                yield event


async def _snapshot_event(conn: asyncpg.Connection, job: Job) -> JobEvent:
    """The event that describes a job's stored state (for late subscribers)."""
    return JobEvent.of_job(
        job,
        position=await job_store.queue_position(conn, job.id),
        verdict=await run_store.verdict_of_job(conn, job.id),
    )


def _redact(run: RunRecord) -> RunRecord:
    """Secret runs show their verdict only: their inputs derive from the secret seed, and so
    do their score, timings and messages (the ranking shows the public run's score)."""
    if not run.secret:
        return run
    from dataclasses import replace

    return replace(run, result={}, score=None)


def _human(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def check_may_delete(board: Leaderboard, actor: Submitter | None, *, admin: bool) -> None:
    """Admins may delete any leaderboard; anybody else only one they created."""
    if not admin and (actor is None or board.creator != actor.external_id):
        raise PermissionDeniedError(f"only admins or the creator of {board.name!r} may delete it")
