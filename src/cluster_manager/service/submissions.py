"""Submissions: taking one in (checked, rate limited, stored with its jobs in one
transaction) and reading it back (its report, its placements, its code)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime

import asyncpg

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.core.ranked_pairs import pair_score
from cluster_manager.core.records import Job, JobEvent, Leaderboard, Placement, RunRecord
from cluster_manager.core.sandboxing import ranking_hold
from cluster_manager.core.submission import validate_submission
from cluster_manager.core.wording import utc_minute
from cluster_manager.service.context import Context
from cluster_manager.service.controls import check_may_submit
from cluster_manager.service.errors import (
    DeadlinePassedError,
    GpuNotAllowedError,
    NotFoundError,
    PermissionDeniedError,
)
from cluster_manager.service.invites import check_member
from cluster_manager.service.leaderboards import board_gpu, find_leaderboard
from cluster_manager.service.quotas import QuotaPolicy, check_quotas
from cluster_manager.service.receipts import SubmissionReceipt, SubmissionReport, Submitter
from cluster_manager.service.rules import HELD_RERUN, redact, redact_job
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import queue_order
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import submissions as sub_store
from cluster_manager.storage.submissions import StoredSubmission

log = logging.getLogger(__name__)


def check_takes_submissions(board: Leaderboard, now: datetime) -> None:
    if not board.takes_submissions(now):
        raise DeadlinePassedError(
            f"the deadline of {board.name!r} passed at {utc_minute(board.deadline)}, and "
            "its organisers take no runs after it"
        )


class Submissions:
    """Taking a submission in and reading it back."""

    def __init__(self, ctx: Context, quotas: QuotaPolicy, max_bytes: int) -> None:
        self.pool = ctx.pool
        self.registry = ctx.registry
        self.clock = ctx.clock
        self.allow_unsandboxed_ranking = ctx.allow_unsandboxed_ranking
        self.quotas = quotas
        self.max_bytes = max_bytes

    async def submit(
        self,
        leaderboard: str,
        user: Submitter,
        file_name: str,
        data: bytes,
        *,
        mode: Mode,  # no default: a ranked run is never what a caller gets by leaving it out
        gpus: Sequence[str] | None = None,
        profile_benchmark: int | None = None,
        profile: ProfileOptions | None = None,
    ) -> SubmissionReceipt:
        board = await find_leaderboard(self.pool, leaderboard)
        check_profile_benchmark(board, mode, profile_benchmark)
        check_profile_options(mode, profile)
        now = self.clock()
        check_takes_submissions(board, now)
        submission = validate_submission(file_name, data, board.task.lang, max_bytes=self.max_bytes)
        asked = gpus or ([submission.gpu] if submission.gpu else None)
        chosen = choose_gpus(board, asked, self.registry.names)
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await check_may_submit(conn, leaderboard_id=board.id, user_id=found.id)
            await check_member(conn, board, found.id)
            await check_quotas(  # racing submissions of one user count each other
                conn,
                policy=self.quotas,
                registry=self.registry,
                board=board,
                user=found,
                mode=mode,
                gpus=chosen,
                now=now,
            )
            submission_id, _ = await sub_store.insert_submission(
                conn,
                leaderboard_id=board.id,
                user_id=found.id,
                file_name=submission.file_name,
                code=submission.code,
                mode=mode,
                submitted_at=now,  # the rate limit counts on the same clock
                profile_benchmark=profile_benchmark,
                profile=profile,
                after_deadline=not board.is_open(now),
            )
            jobs = await job_store.enqueue(conn, submission_id, job_specs(chosen, mode))
        await announce(self.pool, jobs)
        return SubmissionReceipt(
            submission_id,
            board.name,
            user.external_id,
            submission.file_name,
            mode,
            tuple(jobs),
            after_deadline=not board.is_open(now),
        )

    async def ranking_holds(self, submission_id: int) -> dict[str, str]:
        """Per GPU of a ranked submission, why its passing score does not count in the ranking
        (held for review, not fully sandboxed, throttled, no score); a GPU absent from it
        counts. Only the latest public and secret run count (a throttle retry's, say). Why a
        secret run is held is not told (`HELD_RERUN`): the reason can quote its timings."""
        holds: dict[str, str] = {}
        latest: dict[tuple[str, bool], RunRecord] = {}
        for run in await run_store.runs_of_submission(self.pool, submission_id):
            latest[run.gpu, run.secret] = run
        for run in latest.values():
            if run.mode is not Mode.LEADERBOARD or not run.passed:
                continue
            reason = ranking_hold(
                run.result.get("system") or {},
                allow_unsandboxed=self.allow_unsandboxed_ranking,
                review=str(run.result.get("review") or ""),
            )
            if reason is None and run.score is None:
                reason = "not ranked: the run produced no score"
            if reason is not None:
                holds.setdefault(run.gpu, HELD_RERUN if run.secret else reason)
        return holds

    async def code(self, submission_id: int, user: Submitter) -> tuple[str, str]:
        """(file name, code) of a submission; only its author may read it."""
        found = await self._stored(submission_id)
        if found.user != user.external_id:
            raise PermissionDeniedError("you can only read your own submissions")
        return found.file_name, found.code

    async def report(self, submission_id: int, *, admin: bool = False) -> SubmissionReport:
        """The submission's report as its author sees it (secret runs redacted), or in full
        for an admin."""
        return await load_report(self.pool, submission_id, admin=admin)

    async def placements(self, submission_id: int) -> list[Placement]:
        """Where a ranked submission stands on each GPU, and whether it is the user's best;
        its score there is its pair's once that counts (both runs passed, neither held)."""
        found = await self._stored(submission_id)
        runs = await run_store.runs_of_submission(self.pool, submission_id)
        holds = await self.ranking_holds(submission_id)
        placements = []
        for gpu in sorted({r.gpu for r in runs if r.mode is Mode.LEADERBOARD}):
            standing = await run_store.rank_of(
                self.pool,
                leaderboard_id=found.leaderboard_id,
                gpu=gpu,
                user_id=found.user_id,
                after_deadline=found.after_deadline,
            )
            improved = standing is not None and standing[2] == submission_id
            placements.append(
                Placement(
                    gpu=gpu,
                    rank=standing[0] if standing else None,
                    score=None if gpu in holds else _pair_score(runs, gpu),
                    improved=improved,
                    previous_best=None if improved or standing is None else standing[1],
                    after_deadline=found.after_deadline,
                )
            )
        return placements

    async def _stored(self, submission_id: int) -> StoredSubmission:
        found = await sub_store.get_submission(self.pool, submission_id)
        if found is None:
            raise NotFoundError(f"there is no submission {submission_id}")
        return found


async def announce(pool: asyncpg.Pool, jobs: Sequence[Job]) -> None:
    """Publishes each new job with its place in the queue, once it is committed."""
    for job in jobs:
        position = await queue_order.queue_position(pool, job.id)
        log.info(
            "job %s: queued on %s, submission %s in %s mode%s, place %s in line",
            job.id,
            job.gpu,
            job.submission_id,
            job.mode.value,
            " (secret run)" if job.secret else "",
            position,
        )
        await job_store.publish(pool, JobEvent.of_job(job, position=position))


def _pair_score(runs: Sequence[RunRecord], gpu: str) -> float | None:
    """The score the latest ranked pair on `gpu` ranks with, once both of its runs passed."""
    latest = {r.secret: r for r in runs if r.gpu == gpu and r.mode is Mode.LEADERBOARD}
    public, secret = latest.get(False), latest.get(True)
    if public is None or secret is None or not (public.passed and secret.passed):
        return None
    return pair_score(public.score, secret.score)


async def load_report(
    pool: asyncpg.Pool, submission_id: int, *, admin: bool = False
) -> SubmissionReport:
    """A submission with its jobs and runs: secret ones redacted, unless for an admin."""
    found = await sub_store.get_submission(pool, submission_id)
    if found is None:
        raise NotFoundError(f"there is no submission {submission_id}")
    jobs = await job_store.jobs_of_submission(pool, submission_id)
    runs = await run_store.runs_of_submission(pool, submission_id)
    if admin:
        return SubmissionReport(found, tuple(jobs), tuple(runs))
    return SubmissionReport(
        found, tuple(redact_job(j) for j in jobs), tuple(redact(r) for r in runs)
    )


def check_profile_benchmark(board: Leaderboard, mode: Mode, index: int | None) -> None:
    """One benchmark case to profile: only in profile mode, and one the task has."""
    if index is None:
        return
    if mode is not Mode.PROFILE:
        raise ClusterManagerError("a benchmark index is for profile mode only")
    count = len(board.task.benchmarks)
    if not 0 <= index < count:
        raise ClusterManagerError(
            f"benchmark index {index} is out of range: {board.name!r} has {count} benchmark(s)"
        )


def check_profile_options(mode: Mode, profile: ProfileOptions | None) -> None:
    """Nsight Compute's filter: only in profile mode, where ncu runs (never silently dropped)."""
    if profile is not None and mode is not Mode.PROFILE:
        raise ClusterManagerError(
            "Nsight Compute filters (kernel name, name base, launch skip and count) are for "
            f"profile mode only, not {mode.value} mode"
        )


def choose_gpus(
    board: Leaderboard, gpus: Sequence[str] | None, known: Collection[str] = ()
) -> list[str]:
    """The GPU types asked for, each once and as the board spells it; none asked for is fine
    on a one-GPU board. `known`: the registry's types, for a typo's hint."""
    if not gpus:
        if len(board.gpus) == 1:
            return [board.gpus[0]]
        raise GpuNotAllowedError(
            f"{board.name!r} runs on several GPUs; choose from {', '.join(board.gpus)}"
        )
    return list(dict.fromkeys(board_gpu(board, gpu, known) for gpu in gpus))


def job_specs(gpus: Sequence[str], mode: Mode) -> list[tuple[str, Mode, bool]]:
    """(gpu, mode, secret) of each job a submission enqueues."""
    specs = []
    for gpu in gpus:
        specs.append((gpu, mode, False))
        if mode is Mode.LEADERBOARD:
            specs.append((gpu, mode, True))  # the secret re-run that guards the ranking
    return specs
