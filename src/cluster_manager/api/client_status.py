"""A submission's state in popcorn-cli's words (`pending`, `running`, `succeeded`, `failed`,
`timed_out`), and what went wrong: what its polling and its event stream read."""

from __future__ import annotations

from collections.abc import Mapping

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import JobState, RunRecord
from cluster_manager.service import SubmissionReport


def client_status(
    report: SubmissionReport, holds: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """A ranked submission succeeds only as the ranking decides: its public run scored and its
    secret run passed on each GPU, and neither is held out of the ranking (`holds`, from
    `Service.submissions.ranking_holds`)."""
    jobs = report.jobs
    if not report.done:
        dispatched = any(j.state is JobState.DISPATCHED for j in jobs)
        return ("running" if dispatched else "pending"), None
    failed_job = next((j for j in jobs if j.state is JobState.FAILED), None)
    if failed_job is not None:
        return "failed", failed_job.error or "the job could not be run"
    failing = next((r for r in report.runs if not r.passed), None)
    if failing is not None:
        status = "timed_out" if failing.verdict is Verdict.TIMEOUT else "failed"
        return status, _run_message(failing)
    if report.submission.mode is Mode.LEADERBOARD and holds:
        gpu, reason = sorted(holds.items())[0]
        return "failed", f"{gpu}: {reason}"
    if len(report.runs) < len(jobs):
        return "failed", "a job finished without a stored run"
    return "succeeded", None


def _run_message(run: RunRecord) -> str:
    where = f"{run.gpu}{' (secret run)' if run.secret else ''}"
    message = run.result.get("message") if run.result else None
    return f"{where}: {message or run.verdict.value}"
