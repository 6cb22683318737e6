"""Shortcuts for storage tests: leaderboards, submissions and finished jobs without any runner."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import asyncpg

from cluster_manager.core.models import Mode, Task, Verdict
from cluster_manager.core.records import Job, JobState, Leaderboard
from cluster_manager.core.run_results import BenchmarkOutcome, PhaseOutcome, RunResult
from cluster_manager.core.task import load_task
from cluster_manager.service import Service, SubmissionReceipt, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import runs as run_store
from tests.conftest import EXAMPLES
from tests.support.fakes import SANDBOXED

# Later than the test clock (2030-01-01 12:00 UTC) and than the wall clock.
DEADLINE = datetime(2031, 1, 1, tzinfo=UTC)
OWNER = "worker-a"
OTHER_OWNER = "worker-b"

ALICE = Submitter("alice", "Alice")
BOB = Submitter("bob", "Bob")
CAROL = Submitter("carol", "Carol")

TABLES = (
    "users",
    "leaderboards",
    "leaderboard_gpus",
    "templates",
    "code_files",
    "submissions",
    "jobs",
    "runs",
    "rankings",
)

_unique = itertools.count()


@functools.cache
def identity_task() -> Task:
    return load_task(EXAMPLES / "identity_py")


def kernel_code(tag: object | None = None) -> str:
    """A valid Python submission; distinct per call unless `tag` is given."""
    tag = next(_unique) if tag is None else tag
    return f"def custom_kernel(data):\n    return data.clone()  # {tag}\n"


async def make_board(
    service: Service,
    name: str = "board",
    *,
    gpus: Sequence[str] = ("CPU",),
    task: Task | None = None,
    deadline: datetime = DEADLINE,
    creator: Submitter | None = None,
    rate_limit_per_hour: int | None = None,
) -> Leaderboard:
    return await service.leaderboards.create(
        name,
        task or identity_task(),
        deadline,
        gpus,
        creator=creator,
        rate_limit_per_hour=rate_limit_per_hour,
    )


async def submit(
    service: Service,
    board: str = "board",
    user: Submitter = ALICE,
    *,
    code: str | None = None,
    gpus: Sequence[str] | None = None,
    mode: Mode = Mode.LEADERBOARD,
    file_name: str = "submission.py",
) -> SubmissionReceipt:
    data = (code if code is not None else kernel_code()).encode()
    return await service.submissions.submit(board, user, file_name, data, gpus=gpus, mode=mode)


async def board_with_submission(
    service: Service,
    name: str = "board",
    user: Submitter = ALICE,
    *,
    gpus: Sequence[str] = ("CPU",),
    mode: Mode = Mode.LEADERBOARD,
) -> tuple[Leaderboard, SubmissionReceipt]:
    """A leaderboard and one submission of `user` on all its GPUs."""
    board = await make_board(service, name, gpus=gpus)
    receipt = await submit(service, name, user, gpus=list(gpus), mode=mode)
    return board, receipt


def run_result(
    passed: bool = True,
    score: float | None = 1.0,
    *,
    mode: Mode = Mode.LEADERBOARD,
    verdict: Verdict | None = None,
) -> RunResult:
    if verdict is None:
        verdict = Verdict.PASSED if passed else Verdict.WRONG_ANSWER
    return RunResult(
        passed=passed,
        verdict=verdict,
        mode=mode,
        message="" if passed else "mismatch",
        score=score if passed else None,
        system={"gpu": "test", **SANDBOXED},
    )


async def claim_submission(
    pool: asyncpg.Pool,
    submission_id: int,
    *,
    owner: str = OWNER,
    lease_s: float = 60.0,
    gpus: Iterable[str] | None = None,
) -> dict[tuple[str, bool], Job]:
    """Claims every queued job of one submission, keyed by (gpu, secret)."""
    jobs = await job_store.jobs_of_submission(pool, submission_id)
    queued = {j.gpu for j in jobs if j.state is JobState.QUEUED}
    wanted = sorted(queued if gpus is None else queued & set(gpus))
    claimed: list[Job] = []
    for gpu in wanted:
        claimed += await job_store.claim(
            pool,
            owner=owner,
            gpu=gpu,
            max_active=10_000,
            lease_s=lease_s,
            limit=10_000,
            submission_ids=[submission_id],
        )
    return {(j.gpu, j.secret): j for j in claimed}


async def dispatch(pool: asyncpg.Pool, job: Job, *, owner: str = OWNER) -> Job:
    """What a worker does before a run starts: record the external id, then dispatch."""
    assert await job_store.set_external_id(
        pool, job_id=job.id, owner=owner, launcher="fake", external_id=f"ext-{job.id}"
    )
    assert await job_store.mark_dispatched(pool, job_id=job.id, owner=owner)
    fresh = await job_store.get_job(pool, job.id)
    assert fresh is not None
    return fresh


async def record(
    pool: asyncpg.Pool,
    job: Job,
    passed: bool = True,
    score: float | None = 1.0,
    *,
    owner: str = OWNER,
    verdict: Verdict | None = None,
) -> bool:
    """Stores the result of a job this owner holds (record_run's answer is returned)."""
    result = run_result(passed, score, mode=job.mode, verdict=verdict)
    async with pool.acquire() as conn:
        return await run_store.record_run(conn, job=job, owner=owner, result=result)


async def finish_job(
    pool: asyncpg.Pool,
    job: Job,
    passed: bool = True,
    score: float | None = 1.0,
    *,
    owner: str = OWNER,
) -> bool:
    """Claims (if still queued), dispatches and records one job."""
    fresh = await job_store.get_job(pool, job.id)
    assert fresh is not None
    if fresh.state is JobState.QUEUED:
        claimed = await claim_submission(pool, job.submission_id, owner=owner, gpus=[job.gpu])
        fresh = claimed[(job.gpu, job.secret)]
    if fresh.state is JobState.CLAIMED and fresh.lease_owner == owner:
        fresh = await dispatch(pool, fresh, owner=owner)
    return await record(pool, fresh, passed, score, owner=owner)


async def finish_submission(
    pool: asyncpg.Pool,
    receipt: SubmissionReceipt,
    score: float | None = 1.0,
    *,
    passed: bool = True,
    secret_passed: bool | None = None,
    secret_first: bool = False,
    owner: str = OWNER,
) -> None:
    """Finishes every job of the submission: public runs with `passed`/`score`, secret runs
    with `secret_passed` (default: `passed`)."""
    secret_passed = passed if secret_passed is None else secret_passed
    jobs = sorted(receipt.jobs, key=lambda j: (j.gpu, j.secret != secret_first))
    for job in jobs:
        ok = secret_passed if job.secret else passed
        assert await finish_job(pool, job, ok, score, owner=owner)


async def count_rows(db: asyncpg.Pool, *tables: str) -> dict[str, int]:
    return {t: await db.fetchval(f"SELECT count(*) FROM {t}") for t in tables or TABLES}


async def rows_of_board(db: asyncpg.Pool, leaderboard_id: int) -> dict[str, int]:
    """Rows that belong to one leaderboard, table by table."""
    queries = {
        "leaderboards": "SELECT count(*) FROM leaderboards WHERE id = $1",
        "leaderboard_gpus": "SELECT count(*) FROM leaderboard_gpus WHERE leaderboard_id = $1",
        "templates": "SELECT count(*) FROM templates WHERE leaderboard_id = $1",
        "submissions": "SELECT count(*) FROM submissions WHERE leaderboard_id = $1",
        "jobs": "SELECT count(*) FROM jobs j JOIN submissions s ON s.id = j.submission_id "
        "WHERE s.leaderboard_id = $1",
        "runs": "SELECT count(*) FROM runs WHERE leaderboard_id = $1",
        "rankings": "SELECT count(*) FROM rankings WHERE leaderboard_id = $1",
    }
    return {t: await db.fetchval(q, leaderboard_id) for t, q in queries.items()}


# What a secret run's author must never read: its verdict's kind, message, timings, stats.
SECRET_TELLS = ("seed-derived", "timeout", "4242.5", "4.24 µs", "17.2", "held for review")


def telling_result(
    passed: bool = True, score: float | None = 0.003, *, review: str = ""
) -> RunResult:
    """A ranked run that tells all it can: a verdict kind, a message, phase timings and a
    benchmark's statistics (the strings of `SECRET_TELLS`)."""
    verdict = Verdict.PASSED if passed else Verdict.TIMEOUT
    benchmark = BenchmarkOutcome(0, "size: 4096", passed, 9, 4242.5, 1.0, 1.0, 4000.0, 4500.0)
    phase = PhaseOutcome(
        "leaderboard", 0, not passed, 17.25, "seed-derived out", "", verdict, "", (), (benchmark,)
    )
    return RunResult(
        passed=passed,
        verdict=verdict,
        mode=Mode.LEADERBOARD,
        message="seed-derived message" if passed else "leaderboard: timeout after 17.25 s",
        phases=(phase,),
        score=score if passed else None,
        system={"gpu": "test", **SANDBOXED},
        review=review,
        durations={"total": 17.25},
    )


async def record_result(
    pool: asyncpg.Pool, job: Job, result: RunResult, *, owner: str = OWNER
) -> bool:
    """Claims (if still queued), dispatches and stores `result` for one job."""
    fresh = await job_store.get_job(pool, job.id)
    assert fresh is not None
    if fresh.state is JobState.QUEUED:
        claimed = await claim_submission(pool, job.submission_id, owner=owner, gpus=[job.gpu])
        fresh = claimed[(job.gpu, job.secret)]
    if fresh.state is JobState.CLAIMED:
        fresh = await dispatch(pool, fresh, owner=owner)
    async with pool.acquire() as conn:
        return await run_store.record_run(conn, job=fresh, owner=owner, result=result)
