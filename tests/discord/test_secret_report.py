"""`/leaderboard submit` of a ranked submission whose secret re-run tells all it can: the live
status, the report embed and its attached log show the secret run as passed or failed only."""

from __future__ import annotations

import pytest

from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import RunRequest
from cluster_manager.service.rules import HELD_RERUN
from tests.discord.conftest import SOLUTION, create_board
from tests.storage.helpers import SECRET_TELLS, telling_result
from tests.support.fakes import passing


@pytest.mark.reliability(
    "Access",
    "/leaderboard submit of a ranked submission whose secret re-run {case} with a message, "
    "timings and statistics",
    "the live status, the report and its log show the secret run as passed (and held, when "
    "held: not why) or failed, and nothing more",
)
@pytest.mark.parametrize("case", ["held for review", "failed"])
async def test_the_report_shows_the_secret_run_as_passed_or_failed_only(
    make_harness, app, clock, fake_launcher, case, record_property
):
    held = case == "held for review"

    def secret_tells(request: RunRequest) -> RunResult:
        if request.secret_seed is None:
            return passing(request)
        review = "held for review: below the task's floor" if held else ""
        return telling_result(held, 0.003, review=review)

    fake_launcher.outcome = secret_tells
    await create_board(app, clock, gpus=("H100",))
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", mode="leaderboard"
    )
    _, status, report = reply.messages

    (embed,) = report.embeds
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    icon, outcome = ("✅", "passed") if held else ("❌", "failed")
    note = f" — {HELD_RERUN}" if held else ""
    record_property("observed", f"secret re-runs: {fields['Secret re-runs']}")
    assert fields["Secret re-runs"] == f"{icon} H100: {outcome}{note}"
    assert embed["title"] == f"{icon} Submission #1: {outcome}"
    assert f"{icon} **H100** secret re-run: {outcome}" in status.history[-1]
    log = report.files["submission-1.txt"].decode()
    assert f"[H100 secret] {icon} secret re-run: {outcome}{note}" in log
    shown = "\n".join([*status.history, str(embed), log])
    assert [tell for tell in SECRET_TELLS if tell in shown] == []
