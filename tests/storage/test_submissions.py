"""Submitting: validation, GPU choice, jobs enqueued, code storage, rate limits, reading back."""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from cluster_manager.core.errors import InvalidSubmissionError
from cluster_manager.core.models import Mode
from cluster_manager.core.records import JobEvent, JobState
from cluster_manager.core.submission import MAX_SUBMISSION_BYTES, format_size
from cluster_manager.service import (
    DeadlinePassedError,
    GpuNotAllowedError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    Service,
    Submitter,
)
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import queue_order
from cluster_manager.storage import submissions as sub_store
from tests.storage.helpers import (
    ALICE,
    BOB,
    CAROL,
    count_rows,
    finish_job,
    kernel_code,
    make_board,
    submit,
)

KERNEL = b"def custom_kernel(data):\n    return data.clone()\n"


class WallClock:
    """The real time, shifted by a settable offset: agrees with the database's now()."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


@pytest.fixture
def wall_clock() -> WallClock:
    return WallClock()


@pytest.fixture
def wall_service(pool, registry, wall_clock) -> Service:
    return Service(pool, registry, clock=wall_clock)


def _human(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


# --- refused submissions store nothing --------------------------------------------------------


@pytest.mark.reliability(
    "Bad input",
    "submitting to an unknown leaderboard",
    "refused: 'there is no leaderboard named 'nope''; nothing stored",
)
async def test_unknown_leaderboard_is_not_found(service, pool, record_property):
    await make_board(service, "real")
    before = await count_rows(pool)
    with pytest.raises(NotFoundError, match="nope") as info:
        await service.submissions.submit(
            "nope", ALICE, "submission.py", KERNEL, mode=Mode.LEADERBOARD
        )
    record_property("observed", str(info.value))
    assert await count_rows(pool) == before


@pytest.mark.reliability(
    "Bad input",
    "submitting at, just after and days after the deadline (ranked and test mode), where the "
    "organisers take no runs after it",
    "refused: 'the deadline of 'board' passed at …, and its organisers take no runs after it'; "
    "nothing stored",
)
async def test_submission_after_the_deadline_is_refused(service, pool, clock, record_property):
    deadline = clock.now + timedelta(hours=1)
    await make_board(service, deadline=deadline)
    board = await service.controls.set_after_deadline_runs("board", False, "organiser")
    assert not board.after_deadline_runs
    clock.now = deadline - timedelta(seconds=1)
    await submit(service)  # still open
    before = await count_rows(pool)
    for now in (deadline, deadline + timedelta(microseconds=1), deadline + timedelta(days=3)):
        clock.now = now
        refused = r"deadline of 'board' passed .*, and its organisers take no runs after it"
        with pytest.raises(DeadlinePassedError, match=refused) as info:
            await submit(service, user=BOB)
        record_property("observed", str(info.value))
        with pytest.raises(DeadlinePassedError):
            await submit(service, mode=Mode.TEST)
    assert await count_rows(pool) == before


@pytest.mark.reliability(
    "Bad input",
    "submitting for a GPU the leaderboard does not run on (alone, or next to a valid one)",
    "refused: 'does not run on 'H100'; choose from CPU'; nothing stored",
)
async def test_gpu_not_on_the_leaderboard_is_refused(service, pool, record_property):
    await make_board(service, gpus=["CPU"])
    before = await count_rows(pool)
    with pytest.raises(GpuNotAllowedError, match="does not run on 'H100'; choose from CPU") as info:
        await submit(service, gpus=["H100"])
    record_property("observed", str(info.value))
    with pytest.raises(GpuNotAllowedError, match="A100"):
        await submit(service, gpus=["CPU", "A100"])  # one bad GPU refuses the whole submission
    assert await count_rows(pool) == before


@pytest.mark.reliability(
    "Bad input",
    "submitting without a GPU to a leaderboard with several",
    "refused: 'runs on several GPUs; choose from CPU, H100'; nothing stored",
)
async def test_several_gpus_need_a_choice(service, pool, record_property):
    await make_board(service, gpus=["H100", "CPU"])
    before = await count_rows(pool)
    with pytest.raises(GpuNotAllowedError, match="several GPUs; choose from CPU, H100") as info:
        await submit(service)
    record_property("observed", str(info.value))
    with pytest.raises(GpuNotAllowedError, match="several GPUs"):
        await submit(service, gpus=[])
    assert await count_rows(pool) == before


async def test_single_gpu_is_chosen_without_asking(service):
    await make_board(service, gpus=["H100"])
    receipt = await submit(service, mode=Mode.TEST)
    assert [j.gpu for j in receipt.jobs] == ["H100"]


@pytest.mark.reliability(
    "Bad input",
    "`#!POPCORN gpu A100` header naming a GPU the leaderboard lacks",
    "refused naming 'A100'; nothing stored",
)
async def test_popcorn_header_picks_the_gpu(service, pool, record_property):
    await make_board(service, gpus=["CPU", "H100"])
    code = "#!POPCORN gpu H100\n" + kernel_code()
    receipt = await submit(service, code=code)
    assert sorted((j.gpu, j.secret) for j in receipt.jobs) == [("H100", False), ("H100", True)]
    # A GPU named in the call wins over the header.
    receipt = await submit(service, code=code, gpus=["CPU"])
    assert {j.gpu for j in receipt.jobs} == {"CPU"}
    before = await count_rows(pool)
    with pytest.raises(GpuNotAllowedError, match="A100") as info:
        await submit(service, code="#!POPCORN gpu A100\n" + kernel_code())
    record_property("observed", str(info.value))
    # Not a type of this registry: likely a typo, so the board's close types are named.
    assert (
        str(info.value)
        == "'board' does not run on 'A100'; did you mean H100? (it runs on CPU, H100)"
    )
    assert await count_rows(pool) == before
    # A type in another case is the board's own.
    receipt = await submit(service, code="#!POPCORN gpu h100\n" + kernel_code())
    assert {j.gpu for j in receipt.jobs} == {"H100"}


@pytest.mark.parametrize(
    ("file_name", "data", "message"),
    [
        ("submission.py", b"", "empty"),
        (
            "submission.py",
            KERNEL + b"#" * (MAX_SUBMISSION_BYTES - len(KERNEL) + 1),
            "is 256 KiB and 1 byte, over the 256 KiB limit for a submission",
        ),
        ("submission.cu", KERNEL, "takes .py files"),
        ("submission", KERNEL, "takes .py files"),
        ("submission.py", b"def custom_kernel(data):\n    return '\xff\xfe'\n", "not UTF-8"),
        ("submission.py", b"def custom_kernel(data):\n    return 0\x00\n", "binary"),
        ("submission.py", b"def other_kernel(data):\n    return data\n", "custom_kernel"),
        ("submission.py", b"def custom_kernel(data:\n", "invalid Python syntax"),
    ],
    ids=["empty", "too-large", "cuda-ext", "no-ext", "latin1", "nul", "no-entry", "syntax"],
)
@pytest.mark.reliability(
    "Bad input",
    "submitting a bad file to a leaderboard",
    "refused naming the file and the problem; no user, code, submission or job stored",
)
async def test_invalid_files_are_refused_and_nothing_is_stored(
    service, pool, file_name, data, message, record_property
):
    await make_board(service)
    await submit(service)
    before = await count_rows(pool)
    with pytest.raises(InvalidSubmissionError, match=message) as info:
        await service.submissions.submit("board", BOB, file_name, data, mode=Mode.LEADERBOARD)
    record_property("observed", str(info.value))
    assert await count_rows(pool) == before


@pytest.mark.reliability(
    "Bad input",
    "a file exactly at the size limit, then one byte over it",
    "the first accepted, the second refused: 'NAME is <size>, over the <n> KiB limit for a "
    "submission'",
)
async def test_file_of_exactly_the_size_limit_is_accepted(pool, registry, clock, record_property):
    service = Service(pool, registry, clock=clock, max_submission_bytes=len(KERNEL))
    await make_board(service)
    await service.submissions.submit("board", ALICE, "submission.py", KERNEL, mode=Mode.LEADERBOARD)
    own, limit = format_size(len(KERNEL) + 1), format_size(len(KERNEL))
    with pytest.raises(
        InvalidSubmissionError,
        match=f"submission.py is {own}, over the {limit} limit for a submission",
    ) as info:
        await service.submissions.submit(
            "board", ALICE, "submission.py", KERNEL + b"\n", mode=Mode.LEADERBOARD
        )
    record_property("observed", str(info.value))
    assert await count_rows(pool, "submissions") == {"submissions": 1}


@pytest.mark.reliability(
    "Bad input",
    "a crash right after the submission, its code and its jobs are written, before commit",
    "the whole submission rolls back: no new user, code file, submission or job rows",
)
async def test_a_crash_midway_through_submitting_stores_nothing(
    service, pool, monkeypatch, record_property
):
    await make_board(service, gpus=["CPU", "H100"])
    before = await count_rows(pool)
    real_enqueue = job_store.enqueue
    written: list[dict[str, int]] = []

    async def enqueue_then_crash(conn, submission_id, specs):
        jobs = await real_enqueue(conn, submission_id, specs)
        tables = ("users", "code_files", "submissions", "jobs")
        # Inside the transaction the rows are there ...
        written.append({t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in tables})
        raise RuntimeError(f"crash after enqueuing {len(jobs)} jobs")

    monkeypatch.setattr(job_store, "enqueue", enqueue_then_crash)
    with pytest.raises(RuntimeError, match="crash after enqueuing 4 jobs"):
        await submit(service, user=Submitter("newcomer", "New"), gpus=["CPU", "H100"])
    after = await count_rows(pool)
    changed = {t: (before[t], after[t]) for t in after if after[t] != before[t]}
    record_property(
        "observed",
        f"in the transaction: {written[0]}; after the crash: "
        + (f"changed {changed}" if changed else "same rows as before"),
    )
    assert written == [{"users": 1, "code_files": 1, "submissions": 1, "jobs": 4}]
    # ... and after the crash none of them is.
    assert after == before


# --- what a submission enqueues ---------------------------------------------------------------


async def test_ranked_mode_enqueues_a_public_and_a_secret_job_per_gpu(service, pool):
    await make_board(service, gpus=["CPU", "H100"])
    receipt = await submit(service, gpus=["H100", "CPU"], file_name="dir/kernel.py")
    assert receipt.leaderboard == "board"
    assert receipt.user == "alice"
    assert receipt.file_name == "kernel.py"
    assert receipt.mode is Mode.LEADERBOARD
    specs = sorted((j.gpu, j.mode, j.secret) for j in receipt.jobs)
    assert specs == [
        ("CPU", Mode.LEADERBOARD, False),
        ("CPU", Mode.LEADERBOARD, True),
        ("H100", Mode.LEADERBOARD, False),
        ("H100", Mode.LEADERBOARD, True),
    ]
    for job in receipt.jobs:
        assert job.submission_id == receipt.submission_id
        assert job.state is JobState.QUEUED
        assert job.attempts == 0
        assert (job.lease_owner, job.external_id, job.launcher) == (None, None, None)
    stored = await job_store.jobs_of_submission(pool, receipt.submission_id)
    assert stored == sorted(receipt.jobs, key=lambda j: j.id)
    submission = await sub_store.get_submission(pool, receipt.submission_id)
    assert submission is not None
    assert submission.mode is Mode.LEADERBOARD
    assert submission.file_name == "kernel.py"
    assert submission.leaderboard == "board"
    assert submission.user == "alice"


@pytest.mark.parametrize("mode", [Mode.TEST, Mode.BENCHMARK, Mode.PROFILE])
async def test_other_modes_enqueue_one_job_per_gpu(service, mode):
    await make_board(service, gpus=["CPU", "H100"])
    receipt = await submit(service, gpus=["CPU", "H100"], mode=mode)
    assert sorted((j.gpu, j.mode, j.secret) for j in receipt.jobs) == [
        ("CPU", mode, False),
        ("H100", mode, False),
    ]


async def test_gpu_named_twice_is_enqueued_once(service):
    await make_board(service, gpus=["CPU", "H100"])
    receipt = await submit(service, gpus=["CPU", "CPU"])
    assert sorted((j.gpu, j.secret) for j in receipt.jobs) == [("CPU", False), ("CPU", True)]


async def test_identical_code_is_stored_once(service, pool):
    await make_board(service, "one")
    await make_board(service, "two")
    code = kernel_code("same")
    first = await submit(service, "one", ALICE, code=code)
    second = await submit(service, "one", ALICE, code=code)
    third = await submit(service, "two", BOB, code=code, file_name="other.py")
    assert len({first.submission_id, second.submission_id, third.submission_id}) == 3
    counts = await count_rows(pool, "code_files", "submissions")
    assert counts == {"code_files": 1, "submissions": 3}
    row = await pool.fetchrow("SELECT sha256, code FROM code_files")
    assert row["code"] == code
    assert row["sha256"] == hashlib.sha256(code.encode()).hexdigest()
    await submit(service, "one", ALICE, code=kernel_code("different"))
    assert await count_rows(pool, "code_files") == {"code_files": 2}
    for receipt in (first, second, third):
        stored = await sub_store.get_submission(pool, receipt.submission_id)
        assert stored is not None
        assert stored.code == code
    assert (await sub_store.get_submission(pool, third.submission_id)).file_name == "other.py"


async def test_identical_code_submitted_concurrently_is_stored_once(service, pool):
    await make_board(service)
    code = kernel_code("racing")
    users = [Submitter(f"user{i}", f"User {i}") for i in range(8)]
    await asyncio.gather(*(submit(service, user=u, code=code) for u in users))
    assert await count_rows(pool, "code_files", "submissions", "users") == {
        "code_files": 1,
        "submissions": 8,
        "users": 8,
    }


async def test_submitting_updates_the_users_name(service, pool):
    await make_board(service)
    await submit(service, user=Submitter("alice", "Alice"))
    await submit(service, user=Submitter("alice", "Alice Liddell"))
    rows = await pool.fetch("SELECT external_id, name FROM users")
    assert [(r["external_id"], r["name"]) for r in rows] == [("alice", "Alice Liddell")]


# --- rate limits ------------------------------------------------------------------------------


async def test_rate_limit_follows_the_service_clock(service, pool):
    await make_board(service, rate_limit_per_hour=3)
    for _ in range(3):
        await submit(service)
    with pytest.raises(RateLimitedError):
        await submit(service)
    assert await count_rows(pool, "submissions") == {"submissions": 3}


async def test_rate_limit_refuses_the_fourth_submission_within_an_hour(
    wall_service, pool, wall_clock
):
    await make_board(wall_service, rate_limit_per_hour=3)
    first = await submit(wall_service)
    first_at = (await sub_store.get_submission(pool, first.submission_id)).submitted_at
    await submit(wall_service)
    await submit(wall_service)
    await submit(wall_service, mode=Mode.TEST)  # test runs have a limit of their own
    before = await count_rows(pool)
    with pytest.raises(RateLimitedError) as info:
        await submit(wall_service)
    assert await count_rows(pool) == before
    error = info.value
    expected = first_at + timedelta(hours=1) - wall_clock()
    assert abs(error.retry_after - expected) < timedelta(seconds=5)
    assert timedelta(minutes=59) < error.retry_after <= timedelta(minutes=60, seconds=1)
    assert str(error) == (
        "rate limit: 3 ranked submissions per hour on 'board'; "
        f"try again in {_human(int(error.retry_after.total_seconds()))}"
    )

    # Half an hour later: still refused, and the wait has shrunk by as much.
    wall_clock.offset = timedelta(minutes=30)
    with pytest.raises(RateLimitedError) as info:
        await submit(wall_service)
    assert abs(info.value.retry_after - timedelta(minutes=30)) < timedelta(seconds=10)
    assert "try again in 29 min" in str(info.value) or "try again in 30 min" in str(info.value)

    # Once the first submission is more than an hour old, there is room again.
    wall_clock.offset = timedelta(hours=1, seconds=5)
    await submit(wall_service)
    assert await count_rows(pool, "submissions") == {"submissions": 5}


async def test_rate_limit_is_per_user_and_per_leaderboard(wall_service, pool):
    await make_board(wall_service, "one", rate_limit_per_hour=2)
    await make_board(wall_service, "two", rate_limit_per_hour=2)
    for _ in range(2):
        await submit(wall_service, "one", ALICE)
    with pytest.raises(RateLimitedError):
        await submit(wall_service, "one", ALICE)
    await submit(wall_service, "one", BOB)
    await submit(wall_service, "two", ALICE)
    await submit(wall_service, "two", ALICE)
    with pytest.raises(RateLimitedError):
        await submit(wall_service, "two", ALICE)
    await submit(wall_service, "one", BOB)
    with pytest.raises(RateLimitedError):
        await submit(wall_service, "one", BOB)
    rows = await pool.fetch(
        """
        SELECT l.name, u.external_id, count(*) AS n FROM submissions s
        JOIN users u ON u.id = s.user_id JOIN leaderboards l ON l.id = s.leaderboard_id
        GROUP BY 1, 2 ORDER BY 1, 2
        """
    )
    assert [tuple(r) for r in rows] == [("one", "alice", 2), ("one", "bob", 2), ("two", "alice", 2)]


async def test_service_default_rate_limit_applies_without_a_leaderboard_limit(
    pool, registry, wall_clock
):
    service = Service(pool, registry, clock=wall_clock, default_rate_limit_per_hour=2)
    await make_board(service, "default")
    await make_board(service, "own", rate_limit_per_hour=4)
    for _ in range(2):
        await submit(service, "default")
    with pytest.raises(RateLimitedError, match="2 ranked submissions per hour on 'default'"):
        await submit(service, "default")
    for _ in range(4):  # the leaderboard's own limit wins over the default
        await submit(service, "own")
    with pytest.raises(RateLimitedError, match="4 ranked submissions per hour on 'own'"):
        await submit(service, "own")


async def test_concurrent_submissions_respect_the_rate_limit(wall_service, pool):
    await make_board(wall_service, rate_limit_per_hour=3)
    outcomes = await asyncio.gather(
        *(submit(wall_service) for _ in range(10)), return_exceptions=True
    )
    accepted = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(accepted) == 3
    assert len(refused) == 7
    assert all(isinstance(e, RateLimitedError) for e in refused), refused
    assert await count_rows(pool, "submissions", "jobs") == {"submissions": 3, "jobs": 6}


async def test_concurrent_first_submissions_of_a_new_user_respect_the_rate_limit(
    wall_service, pool
):
    await make_board(wall_service, rate_limit_per_hour=1)
    newcomer = Submitter("newcomer", "New")
    outcomes = await asyncio.gather(
        *(submit(wall_service, user=newcomer) for _ in range(5)), return_exceptions=True
    )
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
    assert await count_rows(pool, "submissions", "users") == {"submissions": 1, "users": 1}


# --- reading submissions back -----------------------------------------------------------------


async def test_only_the_author_may_read_the_code(service):
    await make_board(service)
    code = kernel_code("secret sauce")
    receipt = await submit(service, user=ALICE, code=code, file_name="mine.py")
    assert await service.submissions.code(receipt.submission_id, ALICE) == ("mine.py", code)
    # Identity is the external id; the display name does not matter.
    assert await service.submissions.code(receipt.submission_id, Submitter("alice", "x")) == (
        "mine.py",
        code,
    )
    for other in (BOB, Submitter("Alice", "Alice"), Submitter("alice ", "Alice")):
        with pytest.raises(PermissionDeniedError):
            await service.submissions.code(receipt.submission_id, other)
    with pytest.raises(NotFoundError, match="no submission 999999"):
        await service.submissions.code(999_999, ALICE)


async def test_report_of_a_fresh_submission(service):
    board = await make_board(service, gpus=["CPU", "H100"])
    code = kernel_code("report")
    receipt = await submit(service, gpus=["CPU", "H100"], code=code)
    report = await service.submissions.report(receipt.submission_id)
    assert report.submission.id == receipt.submission_id
    assert report.submission.leaderboard_id == board.id
    assert report.submission.leaderboard == "board"
    assert report.submission.user == "alice"
    assert report.submission.code == code
    assert report.jobs == tuple(sorted(receipt.jobs, key=lambda j: j.id))
    assert report.runs == ()
    assert not report.done
    with pytest.raises(NotFoundError):
        await service.submissions.report(999_999)


async def test_report_after_the_runs_hides_secret_details(service, pool):
    await make_board(service)
    receipt = await submit(service)
    public = next(j for j in receipt.jobs if not j.secret)
    secret = next(j for j in receipt.jobs if j.secret)
    assert await finish_job(pool, public, True, 2.5)
    report = await service.submissions.report(receipt.submission_id)
    assert not report.done
    assert [r.job_id for r in report.runs] == [public.id]
    assert await finish_job(pool, secret, False)
    report = await service.submissions.report(receipt.submission_id)
    assert report.done
    assert {j.state for j in report.jobs} == {JobState.FINISHED}
    runs = {r.secret: r for r in report.runs}
    assert runs[False].score == 2.5
    assert runs[False].passed
    assert runs[False].result["score"] == 2.5
    assert runs[False].result["verdict"] == "passed"
    assert not runs[True].passed
    assert runs[True].verdict.value == "failed"  # not how it failed
    assert runs[True].result == {}  # redacted
    stored = await pool.fetchval("SELECT result FROM runs WHERE job_id = $1", secret.id)
    assert stored["verdict"] == "wrong_answer"  # the database keeps it


# --- queue positions --------------------------------------------------------------------------


async def test_submit_publishes_queued_events_with_positions(service, pool):
    await make_board(service, gpus=["CPU", "H100"])
    await submit(service, user=CAROL, gpus=["CPU"])  # two CPU jobs ahead
    received: asyncio.Queue[JobEvent] = asyncio.Queue()

    def on_notify(_conn, _pid, _channel, payload):
        received.put_nowait(JobEvent.from_json(json.loads(payload)))

    async with pool.acquire() as conn:
        await conn.add_listener(job_store.EVENTS_CHANNEL, on_notify)
        try:
            receipt = await submit(service, gpus=["CPU", "H100"])
            events = [await asyncio.wait_for(received.get(), 5) for _ in receipt.jobs]
        finally:
            await conn.remove_listener(job_store.EVENTS_CHANNEL, on_notify)
    assert {e.submission_id for e in events} == {receipt.submission_id}
    assert {e.state for e in events} == {"queued"}
    by_job = {e.job_id: e for e in events}
    assert set(by_job) == {j.id for j in receipt.jobs}
    positions = {(e.gpu, e.secret): e.position for e in events}
    assert positions == {
        ("CPU", False): 3,
        ("CPU", True): 4,
        ("H100", False): 1,
        ("H100", True): 2,
    }
    for job in receipt.jobs:
        assert await queue_order.queue_position(pool, job.id) == by_job[job.id].position
