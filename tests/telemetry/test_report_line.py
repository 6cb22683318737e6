"""The GPU's clock, temperature and power ranges in one line of the CLI's report and of the
Discord embed; nothing for a run without telemetry (a CPU run)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import Job, JobState, RunRecord
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.telemetry import PhaseTelemetry
from cluster_manager.discord import render
from cluster_manager.rendering.reports import format_report, format_submission_report
from cluster_manager.service import SubmissionReport
from cluster_manager.service.rules import HELD_RERUN, redact
from cluster_manager.storage.submissions import StoredSubmission
from cluster_manager.telemetry.summary import summarise
from tests.telemetry.fakes import CLEAN, HOT, FakeProbe

LINE = "GPU: SM clock 1755–1980 MHz, 61–74 °C, 412–698 W, throttled in 50 % (thermal)"
WHEN = datetime(2030, 1, 1, tzinfo=UTC)
HOLD = "not ranked: the GPU throttled in 50 % of the samples (thermal); the run is retried once"


def ranked(telemetry: dict[str, PhaseTelemetry], review: str = "") -> RunResult:
    return RunResult(
        passed=True,
        verdict=Verdict.PASSED,
        mode=Mode.LEADERBOARD,
        message="",
        score=1e-6,
        review=review,
        telemetry=telemetry,
    )


SAMPLED = {"leaderboard": summarise(FakeProbe([CLEAN, HOT]), [CLEAN, HOT])}
CPU = {"leaderboard": PhaseTelemetry.none("NVML unavailable: NVML Shared Library Not Found")}


def embed_text(result: RunResult) -> str:
    submission = StoredSubmission(
        1, 1, "board", 1, "alice", "submission.py", "", Mode.LEADERBOARD, WHEN
    )
    job = Job(1, 1, "H100", Mode.LEADERBOARD, False, JobState.FINISHED, "local", "x", 1, None)
    run = RunRecord(
        1, 1, "board", "alice", "H100", Mode.LEADERBOARD, False, True, Verdict.PASSED,
        result.score, "submission.py", WHEN, WHEN, result.to_json(),
    )  # fmt: skip
    embed = render.report_embed(SubmissionReport(submission, (job,), (run,)), [])
    return "\n".join(str(f.value) for f in embed.fields)


def test_the_cli_report_has_the_gpu_line_and_why_the_run_is_not_ranked():
    text = format_report(ranked(SAMPLED, HOLD))
    assert f"{LINE} (fake, 2 samples)" in text.splitlines()
    assert f"⚠️ {HOLD}" in text


def test_the_discord_report_has_the_gpu_line_and_why_the_run_is_not_ranked():
    text = embed_text(ranked(SAMPLED, HOLD))
    assert f"🌡️ {LINE} (fake, 2 samples)" in text.splitlines()
    assert f"⚠️ {HOLD}" in text


def test_a_cpu_run_shows_no_gpu_line():
    for result in (ranked(CPU), ranked({}), dataclasses.replace(ranked({}), mode=Mode.TEST)):
        assert "GPU:" not in format_report(result)
        assert "GPU:" not in embed_text(result)


def test_a_throttled_secret_run_says_it_is_held_and_nothing_else():
    """A secret run shows its author its verdict only, and that it is held, never why: even a
    throttling GPU's reason is for admins (a floor review's numbers would quote its timings)."""
    stored = dataclasses.replace(
        ranked(SAMPLED, f"held for review: benchmark 0 took 1 µs; {HOLD}"), throttled=HOLD
    )
    run = RunRecord(
        1, 1, "board", "alice", "H100", Mode.LEADERBOARD, True, True, Verdict.PASSED,
        stored.score, "submission.py", WHEN, WHEN, stored.to_json(),
    )  # fmt: skip
    shown = redact(run)
    assert shown.result == {"held": HELD_RERUN} and shown.score is None
    submission = StoredSubmission(
        1, 1, "board", 1, "alice", "submission.py", "", Mode.LEADERBOARD, WHEN
    )
    job = Job(1, 1, "H100", Mode.LEADERBOARD, True, JobState.FINISHED, "local", "x", 1, None)
    report = SubmissionReport(submission, (job,), (shown,))
    text = format_submission_report(report)
    assert f"[H100 secret] ✅ secret re-run: passed — {HELD_RERUN}" in text
    assert "1 µs" not in text and "throttled" not in text
    # A secret run that did not throttle keeps nothing but its verdict.
    assert redact(dataclasses.replace(run, result=ranked(SAMPLED).to_json())).result == {}
