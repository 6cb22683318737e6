"""A profile submission's Nsight Compute report comes back attached to its Discord report, as
the file the report's line names, byte for byte."""

from __future__ import annotations

import base64
import dataclasses

from cluster_manager.core.models import RunRequest, Verdict
from cluster_manager.core.profiling import NCU, ProfilerOutcome
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from cluster_manager.discord import profile_files
from tests.discord.conftest import SOLUTION, create_board
from tests.discord.test_submit import status_and_report
from tests.support.fakes import passing

REPORT = b"NVIDIA Nsight Compute report\x00\x01\x02" * 1000


def profiled(report: bytes):
    def outcome(request: RunRequest) -> RunResult:
        profiler = ProfilerOutcome(
            NCU, report=base64.b64encode(report).decode(), report_bytes=len(report)
        )
        phase = PhaseOutcome("profile", 0, False, 1.0, "", "", Verdict.PASSED, "", (), (), profiler)
        return dataclasses.replace(passing(request), phases=(phase,))

    return outcome


async def test_the_ncu_report_is_attached_to_the_profile_report(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.outcome = profiled(REPORT)
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)

    reply = await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", mode="profile", timeout=60
    )

    _, _, report = status_and_report(reply)
    assert report.files["profile.ncu-rep"] == REPORT
    assert "submission-1.txt" in report.files
    fields = " ".join(f["value"] for f in report.embeds[0]["fields"])
    assert f"Nsight Compute report attached (profile.ncu-rep, {len(REPORT)} bytes)" in fields


async def test_reports_past_discords_budget_are_left_out(make_harness, app, clock, fake_launcher):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.outcome = profiled(b"x" * (profile_files.ATTACHMENT_BUDGET + 1))
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)

    reply = await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", mode="profile", timeout=60
    )

    _, _, report = status_and_report(reply)
    assert set(report.files) == {"submission-1.txt"}  # the message itself still goes out
    fields = " ".join(f["value"] for f in report.embeds[0]["fields"])
    assert "report attached" not in fields  # it said so, though it was left out
    assert "Nsight Compute report not attached: over Discord's 8 MiB" in fields
