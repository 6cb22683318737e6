"""What a ranked pair ranks with: the worse of its public run's and its secret re-run's scores,
once both passed and neither is held; and what the secret run's author reads of it (passed or
failed) against what an admin reads (all of it). Migration 0016 moves stored rankings to
that rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_manager.core.models import Verdict
from cluster_manager.core.records import Placement
from cluster_manager.data import MIGRATIONS_DIR
from cluster_manager.rendering.reports import format_submission_report
from cluster_manager.service.rules import HELD_RERUN
from tests.storage.helpers import (
    ALICE,
    BOB,
    CAROL,
    SECRET_TELLS,
    finish_job,
    make_board,
    record_result,
    submit,
    telling_result,
)

MIGRATION = MIGRATIONS_DIR / "0016.ranked-pair-score.sql"
ROLLBACK = MIGRATIONS_DIR / "0016.ranked-pair-score.rollback.sql"


def job_of(receipt, *, secret: bool):
    return next(j for j in receipt.jobs if j.secret is secret)


async def ranked(service) -> dict[str, float]:
    return {e.user: e.score for e in (await service.leaderboards.ranking("board", "CPU"))["CPU"]}


async def rank_pair(service, pool, user, public_s: float, secret_s: float):
    receipt = await submit(service, user=user)
    assert await finish_job(pool, job_of(receipt, secret=False), True, public_s)
    assert await record_result(pool, job_of(receipt, secret=True), telling_result(True, secret_s))
    return receipt


@pytest.mark.reliability(
    "Anti-cheat",
    "ranked pairs: public 1 ms and secret 3 ms; public 3 ms and secret 1 ms; both 2 ms",
    "each ranks with the worse of its two scores (3 ms, 3 ms, 2 ms), in the ranking, its "
    "history and the submission's placement",
)
async def test_a_pair_ranks_with_the_worse_of_its_two_scores(service, pool, record_property):
    await make_board(service)
    fitted = await rank_pair(service, pool, ALICE, 0.001, 0.003)  # fast on the public inputs
    await rank_pair(service, pool, BOB, 0.003, 0.001)
    await rank_pair(service, pool, CAROL, 0.002, 0.002)
    scores = await ranked(service)
    record_property("observed", f"ranked: {scores}")
    assert scores == {"alice": 0.003, "bob": 0.003, "carol": 0.002}
    history = await service.leaderboards.score_history("board", "CPU")
    assert {p.user: p.score for p in history.points} == scores
    [placement] = await service.submissions.placements(fitted.submission_id)
    assert placement == Placement("CPU", 2, 0.003, True, None)


HELD = {
    "failed": telling_result(False),
    "held for review": telling_result(review="held for review: below the task's floor"),
    "without a score": telling_result(score=None),
}


@pytest.mark.reliability(
    "Access",
    "a ranked submission whose public run passed in 1 ms and whose secret re-run {case}",
    "ranked nowhere; its author reads the secret run as passed or failed (held, when held), "
    "no verdict kind, message, timing or statistics; an admin reads it all",
)
@pytest.mark.parametrize("case", sorted(HELD))
async def test_a_failed_or_held_secret_run_ranks_nothing_and_tells_its_author_nothing(
    service, pool, case, record_property
):
    await make_board(service)
    receipt = await submit(service)
    assert await finish_job(pool, job_of(receipt, secret=False), True, 0.001)
    assert await record_result(pool, job_of(receipt, secret=True), HELD[case])
    assert await ranked(service) == {}
    [placement] = await service.submissions.placements(receipt.submission_id)
    assert (placement.rank, placement.score) == (None, None)

    report = await service.submissions.report(receipt.submission_id)
    [secret] = [r for r in report.runs if r.secret]
    holds = await service.submissions.ranking_holds(receipt.submission_id)
    shown = f"{secret.verdict.value} {secret.score} {secret.result} {holds}"
    record_property("observed", f"{case}: the author reads {shown}")
    assert secret.verdict in {Verdict.PASSED, Verdict.FAILED} and secret.score is None
    assert secret.result in ({}, {"held": HELD_RERUN})
    assert holds in ({}, {"CPU": HELD_RERUN})
    assert not [tell for tell in SECRET_TELLS if tell in shown]

    full = await service.submissions.report(receipt.submission_id, admin=True)
    [stored] = [r for r in full.runs if r.secret]
    assert stored.result == HELD[case].to_json() and stored.verdict is HELD[case].verdict


async def test_the_migration_ranks_stored_pairs_with_the_worse_score(service, pool):
    await make_board(service)
    await rank_pair(service, pool, ALICE, 0.001, 0.003)
    await rank_pair(service, pool, BOB, 0.002, 0.001)
    scoreless = await submit(service, user=CAROL)
    assert await finish_job(pool, job_of(scoreless, secret=False), True, 0.0005)
    assert await record_result(pool, job_of(scoreless, secret=True), telling_result(score=None))
    # As the rankings read when they took the public run's score alone.
    await _run_sql(pool, ROLLBACK)
    await pool.execute(
        "INSERT INTO rankings (leaderboard_id, gpu, user_id, submission_id, score, submitted_at)"
        " SELECT leaderboard_id, 'CPU', user_id, id, 0.0005, submitted_at FROM submissions"
        " WHERE id = $1",
        scoreless.submission_id,
    )
    assert await ranked(service) == {"alice": 0.001, "bob": 0.002, "carol": 0.0005}
    version = await pool.fetchval("SELECT history_version FROM leaderboards")

    await _run_sql(pool, MIGRATION)
    assert await ranked(service) == {"alice": 0.003, "bob": 0.002}
    history = await service.leaderboards.score_history("board", "CPU")
    assert {p.user: p.score for p in history.points} == {"alice": 0.003, "bob": 0.002}
    assert await pool.fetchval("SELECT history_version FROM leaderboards") > version


async def _run_sql(pool, path: Path) -> None:
    await pool.execute(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("passed", [True, False], ids=["passed", "failed"])
async def test_the_text_report_shows_the_author_passed_or_failed_and_an_admin_all(
    service, pool, passed
):
    """The CLI's report (and the bot's attached log) of the same submission, as its author
    and as an admin reads it."""
    await make_board(service)
    receipt = await rank_pair(service, pool, ALICE, 0.001, 0.003) if passed else None
    if receipt is None:
        receipt = await submit(service)
        assert await finish_job(pool, job_of(receipt, secret=False), True, 0.001)
        assert await record_result(pool, job_of(receipt, secret=True), telling_result(False))
    icon, outcome = ("✅", "passed") if passed else ("❌", "failed")

    mine = format_submission_report(
        await service.submissions.report(receipt.submission_id), with_output=True
    )
    assert f"[CPU secret] {icon} secret re-run: {outcome}" in mine
    assert [tell for tell in SECRET_TELLS if tell in mine] == []

    full = format_submission_report(
        await service.submissions.report(receipt.submission_id, admin=True), with_output=True
    )
    assert "[CPU secret]" in full and "seed-derived" in full
    assert ("4.24 µs" if passed else "leaderboard: timeout") in full
