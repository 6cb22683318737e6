"""Rankings: a score counts only once its public and secret runs both passed on that GPU."""

from __future__ import annotations

import asyncio

import pytest

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import JobState, Placement
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from cluster_manager.service import GpuNotAllowedError, NotFoundError, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import submissions as sub_store
from tests.storage.helpers import (
    ALICE,
    BOB,
    CAROL,
    OWNER,
    claim_submission,
    count_rows,
    dispatch,
    finish_job,
    finish_submission,
    make_board,
    record,
    run_result,
    submit,
)
from tests.support.fakes import SANDBOXED


def public_job(receipt, gpu="CPU"):
    return next(j for j in receipt.jobs if j.gpu == gpu and not j.secret)


def secret_job(receipt, gpu="CPU"):
    return next(j for j in receipt.jobs if j.gpu == gpu and j.secret)


async def ranked(service, gpu="CPU", board="board"):
    """(user, score, submission id) in ranking order."""
    entries = (await service.leaderboards.ranking(board, gpu))[gpu]
    return [(e.user, e.score, e.submission_id) for e in entries]


async def ranks(service, gpu="CPU", board="board"):
    return [(e.rank, e.user) for e in (await service.leaderboards.ranking(board, gpu))[gpu]]


@pytest.fixture
async def board(service):
    return await make_board(service, gpus=["CPU", "H100"])


# --- a ranking needs both runs to pass --------------------------------------------------------


async def test_public_passed_and_secret_failed_is_not_ranked(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    assert await finish_job(pool, public_job(receipt), True, 1.0)
    assert await finish_job(pool, secret_job(receipt), False)
    assert await ranked(service) == []
    assert await count_rows(pool, "rankings", "runs") == {"rankings": 0, "runs": 2}
    [placement] = await service.submissions.placements(receipt.submission_id)
    assert placement == Placement("CPU", None, None, False, None)


async def test_public_passed_and_secret_missing_is_not_ranked(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    [public] = await job_store.claim(
        pool, owner=OWNER, gpu="CPU", max_active=2, lease_s=60, limit=1
    )
    assert public.id == public_job(receipt).id
    assert await record(pool, await dispatch(pool, public), True, 1.0)
    secret = await job_store.get_job(pool, secret_job(receipt).id)
    assert secret.state is JobState.QUEUED
    assert await ranked(service) == []
    # Claimed and dispatched but without a result yet: still not ranked.
    claimed = await claim_submission(pool, receipt.submission_id)
    assert list(claimed) == [("CPU", True)]
    secret = await dispatch(pool, claimed[("CPU", True)])
    assert await ranked(service) == []
    [placement] = await service.submissions.placements(receipt.submission_id)
    assert (placement.rank, placement.score, placement.improved) == (None, None, False)
    # The secret run arrives: now ranked, with the worse of the two scores.
    assert await record(pool, secret, True, 9.0)
    assert await ranked(service) == [("alice", 9.0, receipt.submission_id)]


async def test_secret_passed_and_public_failed_is_not_ranked(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    assert await finish_job(pool, secret_job(receipt), True, 1.0)
    assert await finish_job(pool, public_job(receipt), False)
    assert await ranked(service) == []
    assert await count_rows(pool, "rankings") == {"rankings": 0}


async def test_both_failed_is_not_ranked(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    await finish_submission(pool, receipt, passed=False)
    assert await ranked(service) == []


async def test_public_passed_without_a_score_is_not_ranked(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    await finish_submission(pool, receipt, None)
    assert await ranked(service) == []
    assert await count_rows(pool, "rankings") == {"rankings": 0}


@pytest.mark.parametrize("secret_first", [False, True], ids=["public-first", "secret-first"])
async def test_both_passed_is_ranked_in_either_order(service, pool, board, secret_first):
    receipt = await submit(service, gpus=["CPU"])
    first, second = (
        (secret_job(receipt), public_job(receipt))
        if secret_first
        else (public_job(receipt), secret_job(receipt))
    )
    scores = {False: 2.0, True: 7.0}
    assert await finish_job(pool, first, True, scores[first.secret])
    assert await ranked(service) == []
    assert await finish_job(pool, second, True, scores[second.secret])
    assert await ranked(service) == [("alice", 7.0, receipt.submission_id)]
    [entry] = (await service.leaderboards.ranking("board", "CPU"))["CPU"]
    submission = await sub_store.get_submission(pool, receipt.submission_id)
    assert entry.rank == 1
    assert entry.submitted_at == submission.submitted_at


async def test_public_and_secret_recorded_concurrently_are_ranked(service, pool, board):
    users = [Submitter(f"user{i}", f"User {i}") for i in range(6)]
    receipts = [await submit(service, user=u, gpus=["CPU"]) for u in users]
    claimed = [await claim_submission(pool, r.submission_id) for r in receipts]
    results = await asyncio.gather(
        *(
            record(pool, job, True, float(i + 1))
            for i, jobs in enumerate(claimed)
            for job in jobs.values()
        )
    )
    assert all(results)
    assert await ranked(service) == [
        (u.external_id, float(i + 1), r.submission_id)
        for i, (u, r) in enumerate(zip(users, receipts, strict=True))
    ]


async def test_runs_on_different_gpus_do_not_make_a_pair(service, pool, board):
    receipt = await submit(service, gpus=["CPU", "H100"])
    assert await finish_job(pool, public_job(receipt, "CPU"), True, 1.0)
    assert await finish_job(pool, secret_job(receipt, "H100"), True, 1.0)
    assert await ranked(service, "CPU") == []
    assert await ranked(service, "H100") == []
    assert await finish_job(pool, secret_job(receipt, "CPU"), False)
    assert await finish_job(pool, public_job(receipt, "H100"), True, 3.0)
    assert await ranked(service, "CPU") == []
    assert await ranked(service, "H100") == [("alice", 3.0, receipt.submission_id)]


# --- best per user ----------------------------------------------------------------------------


async def test_better_submission_replaces_worse_does_not(service, pool, board):
    first = await submit(service, gpus=["CPU"])
    await finish_submission(pool, first, 2.0)
    assert await ranked(service) == [("alice", 2.0, first.submission_id)]

    worse = await submit(service, gpus=["CPU"])
    await finish_submission(pool, worse, 3.0)
    assert await ranked(service) == [("alice", 2.0, first.submission_id)]

    equal = await submit(service, gpus=["CPU"])  # a tie keeps the earlier submission
    await finish_submission(pool, equal, 2.0)
    assert await ranked(service) == [("alice", 2.0, first.submission_id)]

    better_but_secret_failed = await submit(service, gpus=["CPU"])
    await finish_submission(pool, better_but_secret_failed, 0.5, secret_passed=False)
    assert await ranked(service) == [("alice", 2.0, first.submission_id)]

    better = await submit(service, gpus=["CPU"])
    await finish_submission(pool, better, 1.5)
    assert await ranked(service) == [("alice", 1.5, better.submission_id)]
    entry = (await service.leaderboards.ranking("board", "CPU"))["CPU"][0]
    stored = await sub_store.get_submission(pool, better.submission_id)
    assert entry.submitted_at == stored.submitted_at
    assert await count_rows(pool, "rankings", "runs") == {"rankings": 1, "runs": 10}


async def test_an_older_submission_finishing_late_does_not_displace_a_better_one(
    service, pool, board
):
    old = await submit(service, gpus=["CPU"])
    new = await submit(service, gpus=["CPU"])
    await finish_submission(pool, new, 1.0)
    await finish_submission(pool, old, 4.0)
    assert await ranked(service) == [("alice", 1.0, new.submission_id)]


async def test_best_is_kept_per_gpu(service, pool, board):
    first = await submit(service, gpus=["CPU", "H100"])
    second = await submit(service, gpus=["CPU", "H100"])
    for job in first.jobs:
        assert await finish_job(pool, job, True, 1.0 if job.gpu == "CPU" else 5.0)
    for job in second.jobs:
        assert await finish_job(pool, job, True, 2.0 if job.gpu == "CPU" else 3.0)
    assert await ranked(service, "CPU") == [("alice", 1.0, first.submission_id)]
    assert await ranked(service, "H100") == [("alice", 3.0, second.submission_id)]
    both = await service.leaderboards.ranking("board")
    assert set(both) == {"CPU", "H100"}
    assert [e.submission_id for e in both["CPU"]] == [first.submission_id]
    assert [e.submission_id for e in both["H100"]] == [second.submission_id]


async def test_users_are_ranked_separately(service, pool, board):
    for user, score in ((ALICE, 3.0), (BOB, 1.0), (CAROL, 2.0), (ALICE, 0.5)):
        await finish_submission(pool, await submit(service, user=user, gpus=["CPU"]), score)
    assert [(u, s) for u, s, _ in await ranked(service)] == [
        ("alice", 0.5),
        ("bob", 1.0),
        ("carol", 2.0),
    ]
    assert await ranks(service) == [(1, "alice"), (2, "bob"), (3, "carol")]


async def test_rankings_are_per_leaderboard(service, pool, board):
    await make_board(service, "other", gpus=["CPU"])
    await finish_submission(pool, await submit(service, "board", ALICE, gpus=["CPU"]), 1.0)
    await finish_submission(pool, await submit(service, "other", ALICE, gpus=["CPU"]), 5.0)
    await finish_submission(pool, await submit(service, "other", BOB, gpus=["CPU"]), 2.0)
    assert [u for u, _, _ in await ranked(service, board="board")] == ["alice"]
    assert [(u, s) for u, s, _ in await ranked(service, board="other")] == [
        ("bob", 2.0),
        ("alice", 5.0),
    ]


# --- ties and pagination ----------------------------------------------------------------------


async def test_equal_scores_share_a_rank_and_the_earlier_submission_comes_first(
    service, pool, board
):
    by_bob = await submit(service, user=BOB, gpus=["CPU"])
    by_alice = await submit(service, user=ALICE, gpus=["CPU"])
    by_carol = await submit(service, user=CAROL, gpus=["CPU"])
    # Finished in another order than submitted: the submission time decides.
    await finish_submission(pool, by_carol, 2.0)
    await finish_submission(pool, by_alice, 1.0)
    await finish_submission(pool, by_bob, 1.0)
    entries = (await service.leaderboards.ranking("board", "CPU"))["CPU"]
    assert [(e.rank, e.user, e.score) for e in entries] == [
        (1, "bob", 1.0),
        (1, "alice", 1.0),
        (3, "carol", 2.0),
    ]
    assert [e.submission_id for e in entries] == [
        by_bob.submission_id,
        by_alice.submission_id,
        by_carol.submission_id,
    ]
    # Placements agree with the ranking.
    for receipt, rank in ((by_bob, 1), (by_alice, 1), (by_carol, 3)):
        [placement] = await service.submissions.placements(receipt.submission_id)
        assert (placement.rank, placement.improved) == (rank, True)


async def test_ties_are_ordered_by_submission_time_not_by_id(service, pool, board):
    by_bob = await submit(service, user=BOB, gpus=["CPU"])
    by_alice = await submit(service, user=ALICE, gpus=["CPU"])
    # Alice's request began first although its row was written second.
    await pool.execute(
        "UPDATE submissions SET submitted_at = submitted_at - interval '1 minute' WHERE id = $1",
        by_alice.submission_id,
    )
    await finish_submission(pool, by_bob, 1.0)
    await finish_submission(pool, by_alice, 1.0)
    entries = (await service.leaderboards.ranking("board", "CPU"))["CPU"]
    assert [(e.rank, e.user) for e in entries] == [(1, "alice"), (1, "bob")]


async def test_pagination_keeps_the_overall_ranks(service, pool, board):
    users = [Submitter(f"user{i}", f"User {i}") for i in range(6)]
    scores = [1.0, 2.0, 2.0, 4.0, 5.0, 6.0]
    for user, score in zip(users, scores, strict=True):
        await finish_submission(pool, await submit(service, user=user, gpus=["CPU"]), score)
    full = (await service.leaderboards.ranking("board", "CPU"))["CPU"]
    assert [e.rank for e in full] == [1, 2, 2, 4, 5, 6]
    page = (await service.leaderboards.ranking("board", "CPU", limit=2, offset=2))["CPU"]
    assert [(e.rank, e.user) for e in page] == [(2, "user2"), (4, "user3")]
    assert (await service.leaderboards.ranking("board", "CPU", limit=2, offset=0))["CPU"] == full[
        :2
    ]
    assert (await service.leaderboards.ranking("board", "CPU", limit=10, offset=4))["CPU"] == full[
        4:
    ]
    assert (await service.leaderboards.ranking("board", "CPU", limit=3, offset=6))["CPU"] == []
    assert (await service.leaderboards.ranking("board", "CPU", limit=0))["CPU"] == []
    assert (await service.leaderboards.ranking("board", "H100"))["H100"] == []


async def test_ranking_of_a_gpu_not_on_the_leaderboard_is_refused(service, pool):
    await make_board(service, "cpu-only", gpus=["CPU"])
    with pytest.raises(GpuNotAllowedError, match="does not run on 'H100'"):
        await service.leaderboards.ranking("cpu-only", "H100")
    with pytest.raises(GpuNotAllowedError, match="A100"):
        await service.leaderboards.ranking("cpu-only", "A100")
    assert await service.leaderboards.ranking("cpu-only") == {"CPU": []}
    with pytest.raises(NotFoundError):
        await service.leaderboards.ranking("missing", "CPU")


# --- results are written once -----------------------------------------------------------------


@pytest.mark.reliability(
    "Faults",
    "the same job's result recorded again, as a worker retrying after dying in finalisation would",
    "one run row and one ranking; later records are refused",
)
async def test_recording_a_job_twice_writes_one_run(service, pool, board, record_property):
    receipt = await submit(service, gpus=["CPU"])
    claimed = await claim_submission(pool, receipt.submission_id)
    public = claimed[("CPU", False)]
    assert await record(pool, public, True, 1.0)
    assert not await record(pool, public, True, 0.1)
    assert not await record(pool, public, False)
    rows = await pool.fetch("SELECT passed, score FROM runs WHERE job_id = $1", public.id)
    assert [tuple(r) for r in rows] == [(True, 1.0)]
    assert await record(pool, claimed[("CPU", True)], True, 1.0)
    assert not await record(pool, claimed[("CPU", True)], True, 1.0)
    counts = await count_rows(pool, "runs", "rankings")
    record_property(
        "observed", f"{counts['runs']} run rows for 2 jobs, {counts['rankings']} ranking"
    )
    assert counts == {"runs": 2, "rankings": 1}
    assert await ranked(service) == [("alice", 1.0, receipt.submission_id)]


@pytest.mark.reliability(
    "Faults",
    "8 concurrent records of one job's result",
    "exactly one is written; the 7 others are refused",
)
async def test_concurrent_recording_of_one_job_writes_one_run(
    service, pool, board, record_property
):
    receipt = await submit(service, gpus=["CPU"])
    claimed = await claim_submission(pool, receipt.submission_id)
    public = claimed[("CPU", False)]
    results = await asyncio.gather(*(record(pool, public, True, float(i)) for i in range(8)))
    runs = (await count_rows(pool, "runs"))["runs"]
    record_property(
        "observed", f"{sum(results)} written, {results.count(False)} refused; {runs} run row"
    )
    assert sorted(results) == [False] * 7 + [True]
    assert await count_rows(pool, "runs") == {"runs": 1}


@pytest.mark.reliability(
    "Faults",
    "recording a result for a job that is still queued, or is held by another worker",
    "nothing is written; the job stays with its holder",
)
async def test_recording_a_job_not_held_writes_nothing(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    public = public_job(receipt)
    assert not await record(pool, public, True, 1.0)  # still queued: nobody holds it
    claimed = await claim_submission(pool, receipt.submission_id)
    assert not await record(pool, claimed[("CPU", False)], True, 1.0, owner="someone-else")
    assert await count_rows(pool, "runs") == {"runs": 0}
    assert (await job_store.get_job(pool, public.id)).state is JobState.CLAIMED


async def test_run_rows_hold_the_result(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    claimed = await claim_submission(pool, receipt.submission_id)
    job = claimed[("CPU", False)]
    result = run_result(False, verdict=Verdict.TIMEOUT)
    async with pool.acquire() as conn:
        assert await run_store.record_run(conn, job=job, owner=OWNER, result=result)
    row = await pool.fetchrow("SELECT * FROM runs WHERE job_id = $1", job.id)
    assert row["submission_id"] == receipt.submission_id
    assert row["gpu"] == "CPU"
    assert row["mode"] == "leaderboard"
    assert row["secret"] is False
    assert row["passed"] is False
    assert row["verdict"] == "timeout"
    assert row["score"] is None
    assert row["result"] == result.to_json()
    assert row["system"] == {"gpu": "test", **SANDBOXED}
    assert await run_store.verdict_of_job(pool, job.id) == "timeout"
    fresh = await job_store.get_job(pool, job.id)
    assert (fresh.state, fresh.lease_owner) == (JobState.FINISHED, None)


async def test_result_whose_output_holds_a_nul_character_is_recorded(service, pool, board):
    receipt = await submit(service, gpus=["CPU"])
    claimed = await claim_submission(pool, receipt.submission_id)
    job = claimed[("CPU", False)]
    phase = PhaseOutcome(
        name="leaderboard",
        exit_code=0,
        timed_out=False,
        duration_s=0.5,
        stdout="printed by the kernel: \x00",
        stderr="",
        verdict=Verdict.PASSED,
        message="",
    )
    result = RunResult(
        passed=True,
        verdict=Verdict.PASSED,
        mode=Mode.LEADERBOARD,
        message="",
        phases=(phase,),
        score=1.0,
    )
    async with pool.acquire() as conn:
        assert await run_store.record_run(conn, job=job, owner=OWNER, result=result)
    assert await run_store.verdict_of_job(pool, job.id) == "passed"
    assert await count_rows(pool, "runs") == {"runs": 1}


@pytest.mark.parametrize("mode", [Mode.TEST, Mode.BENCHMARK, Mode.PROFILE])
async def test_other_modes_never_rank(service, pool, board, mode):
    receipt = await submit(service, gpus=["CPU", "H100"], mode=mode)
    await finish_submission(pool, receipt, 0.001)
    assert await count_rows(pool, "runs", "rankings") == {"runs": 2, "rankings": 0}
    assert await service.leaderboards.ranking("board") == {"CPU": [], "H100": []}
    assert await service.submissions.placements(receipt.submission_id) == []


# --- placements -------------------------------------------------------------------------------


async def test_placements_of_improving_and_non_improving_submissions(service, pool, board):
    await finish_submission(pool, await submit(service, user=BOB, gpus=["CPU"]), 1.0)
    first = await submit(service, gpus=["CPU", "H100"])
    for job in first.jobs:
        assert await finish_job(pool, job, True, 2.0 if job.gpu == "CPU" else 4.0)
    assert await service.submissions.placements(first.submission_id) == [
        Placement("CPU", 2, 2.0, True, None),
        Placement("H100", 1, 4.0, True, None),
    ]
    # Worse on CPU, better on H100.
    second = await submit(service, gpus=["CPU", "H100"])
    for job in second.jobs:
        assert await finish_job(pool, job, True, 3.0 if job.gpu == "CPU" else 1.5)
    assert await service.submissions.placements(second.submission_id) == [
        Placement("CPU", 2, 3.0, False, 2.0),
        Placement("H100", 1, 1.5, True, None),
    ]
    # The first submission is still the best on CPU but no longer on H100.
    assert await service.submissions.placements(first.submission_id) == [
        Placement("CPU", 2, 2.0, True, None),
        Placement("H100", 1, 4.0, False, 1.5),
    ]


async def test_placements_of_a_submission_still_running(service, pool, board):
    receipt = await submit(service, gpus=["CPU", "H100"])
    assert await service.submissions.placements(receipt.submission_id) == []
    assert await finish_job(pool, public_job(receipt, "H100"), True, 1.0)
    # No score before the secret run is in: the pair's is the worse of the two.
    assert await service.submissions.placements(receipt.submission_id) == [
        Placement("H100", None, None, False, None)
    ]
    with pytest.raises(NotFoundError):
        await service.submissions.placements(999_999)


# --- personal runs ----------------------------------------------------------------------------


@pytest.mark.reliability(
    "Access",
    "a user lists their runs on a board where others submitted too, ranked runs included",
    "only their own runs; secret runs show the verdict without any detail",
)
async def test_personal_runs_are_the_users_own_with_secrets_redacted(
    service, pool, board, record_property
):
    await make_board(service, "other", gpus=["CPU"])
    mine = await submit(service, gpus=["CPU", "H100"])
    await finish_submission(pool, mine, 1.0)
    tested = await submit(service, gpus=["CPU"], mode=Mode.TEST)
    await finish_submission(pool, tested, None, passed=False)
    await finish_submission(pool, await submit(service, user=BOB, gpus=["CPU"]), 2.0)
    await finish_submission(pool, await submit(service, "other", ALICE), 3.0)

    runs = await service.leaderboards.personal_runs("board", ALICE)
    record_property(
        "observed",
        f"{len(runs)} runs, all of {sorted({r.user for r in runs})}; secret runs' results: "
        f"{[r.result for r in runs if r.secret]}",
    )
    assert len(runs) == 5
    assert {r.user for r in runs} == {"alice"}
    assert {r.leaderboard for r in runs} == {"board"}
    assert {r.submission_id for r in runs} == {mine.submission_id, tested.submission_id}
    assert [r.created_at for r in runs] == sorted(r.created_at for r in runs)
    secret = [r for r in runs if r.secret]
    public = [r for r in runs if not r.secret]
    assert len(secret) == 2
    assert all(r.result == {} for r in secret)
    assert all(r.verdict is Verdict.PASSED and r.passed for r in secret)  # verdict stays
    assert len(public) == 3
    assert all(r.result["verdict"] == r.verdict.value for r in public)
    assert all(r.result["mode"] == r.mode.value for r in public)
    # The database keeps the secret details; only the view is redacted.
    stored = await pool.fetch("SELECT result FROM runs WHERE secret")
    assert all(r["result"] != {} for r in stored)

    assert len(await service.leaderboards.personal_runs("board", BOB)) == 2
    assert len(await service.leaderboards.personal_runs("other", ALICE)) == 2
    assert await service.leaderboards.personal_runs("board", CAROL) == []
    with pytest.raises(NotFoundError):
        await service.leaderboards.personal_runs("missing", ALICE)


async def test_the_rankings_history_holds_each_improvement_the_ranking_accepted(service, pool):
    """What the charts draw: a user's better score is an event; a slower one, a pair whose
    secret run failed, and the re-ranking after a deletion are not; deleting takes the
    deleted submission's events with it."""
    await make_board(service)
    scores = [(ALICE, 2.0, True), (ALICE, 1.0, True), (ALICE, 1.5, True), (BOB, 0.5, False)]
    receipts = []
    for user, score, secret_ok in scores:
        receipt = await submit(service, user=user)
        await finish_submission(pool, receipt, score, secret_passed=secret_ok)
        receipts.append(receipt)
    history = await service.leaderboards.score_history("board", "CPU")
    assert [(p.user, p.score) for p in history.points] == [("alice", 2.0), ("alice", 1.0)]
    with pytest.raises(GpuNotAllowedError):
        await service.leaderboards.score_history("board", "H100")

    best = receipts[1]
    await service.history.delete(best.submission_id, ALICE)
    after = await service.leaderboards.score_history("board", "CPU")
    assert [(p.user, p.score) for p in after.points] == [("alice", 2.0)]
    assert after.version != history.version
    # The ranking itself fell back to alice's next best (1.5), without a new event.
    ranking = (await service.leaderboards.ranking("board", "CPU"))["CPU"]
    assert [(e.user, e.score) for e in ranking] == [("alice", 1.5)]
