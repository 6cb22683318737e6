"""JSON shapes of the API: the ones popcorn-cli parses (field for field), and our own.

A secret run shows its verdict and nothing derived from its inputs (no result, no
diagnostics, no score); a leaderboard never shows its secret seed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cluster_manager.core.models import Mode, RunResult, Task, Verdict
from cluster_manager.core.records import Job, JobState, Leaderboard, RankingEntry, RunRecord
from cluster_manager.core.scoring import share_of_peak
from cluster_manager.core.speed_of_light import Peaks
from cluster_manager.rendering.reports import format_submission_report
from cluster_manager.service import QueueStatus, SubmissionReceipt, SubmissionReport

Json = dict[str, Any]


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def task_view(task: Task) -> Json:
    """What a competitor may read of a task: not the files' contents (`/task` has those)."""
    return {
        "lang": task.lang.value,
        "description": task.description,
        "files": [f.name for f in task.files],
        "tests": list(task.tests),
        "benchmarks": list(task.benchmarks),
        "ranking_by": task.ranking_by.value,
        "multi_gpu": task.multi_gpu,
        "templates": sorted(task.templates),
        # Ours, not popcorn's: what each benchmark case must do (README, "Task format").
        "speed_of_light": None if task.speed_of_light is None else vars(task.speed_of_light),
    }


def leaderboard_view(board: Leaderboard) -> Json:
    return {
        "id": board.id,
        "name": board.name,
        "description": board.description or board.task.description,
        "deadline": iso(board.deadline),
        "gpu_types": list(board.gpus),
        "invite_only": board.closed,
        "channel_policy": board.channel_policy.value,
        # Ours: whether it takes runs after its deadline (ranked on their own, `after_deadline`).
        "after_deadline_runs": board.after_deadline_runs,
        # Ours: the most members a team may have; whether its members share the hourly quota.
        "team_size": board.team_size,
        "team_quotas": board.team_quotas,
        "created_at": iso(board.created_at),
        "task": task_view(board.task),
    }


def ranking_view(
    board: Leaderboard,
    rankings: dict[str, list[RankingEntry]],
    peaks: Mapping[str, Peaks] | None = None,
    *,
    after_deadline: bool = False,
) -> Json:
    """`peaks`: the board's GPU types' published peaks: each score's `fraction_of_peak` (the
    speed of light's share of it; null where the task or the type states none).
    `after_deadline`: the rankings are those of the runs after the deadline, not the
    competition's."""
    peaks = peaks or {}
    return {
        **leaderboard_view(board),
        "after_deadline": after_deadline,
        "rankings": {
            gpu: [
                {
                    "rank": e.rank,
                    "user": e.user,
                    # Ours: the team whose entry this is (`user` holds its best), or null.
                    "team": e.team,
                    "score": e.score,
                    "submission_id": e.submission_id,
                    "submission_time": iso(e.submitted_at),
                    "fraction_of_peak": share_of_peak(board.task, peaks.get(gpu), e.score),
                }
                for e in entries
            ]
            for gpu, entries in rankings.items()
        },
        "peaks": {gpu: p.to_json() for gpu, p in peaks.items()},
    }


def job_view(job: Job) -> Json:
    """A job as its submitter sees it: not where its run lives, which worker holds it or how
    often it was tried (a secret job's retries could tell of its run)."""
    return {
        "id": job.id,
        "submission_id": job.submission_id,
        "gpu": job.gpu,
        "mode": job.mode.value,
        "secret": job.secret,
        "state": job.state.value,
        "launcher": job.launcher,
        "error": job.error,
        "dispatched_at": iso(job.dispatched_at),
        "heartbeat_at": iso(job.heartbeat_at),
    }


def receipt_view(receipt: SubmissionReceipt) -> Json:
    """What a submission just stored is: its id, who submitted it and the jobs it queued."""
    return {
        "submission_id": receipt.submission_id,
        "leaderboard": receipt.leaderboard,
        "user": receipt.user,
        "file_name": receipt.file_name,
        "mode": receipt.mode.value,
        "jobs": [job_view(j) for j in receipt.jobs],
        "after_deadline": receipt.after_deadline,
    }


def queue_view(queue: QueueStatus) -> Json:
    return {
        "runner": queue.launcher,
        "gpu": queue.gpu,
        "queued_jobs": queue.queued,
        "running_jobs": queue.running,
    }


def client_status(
    report: SubmissionReport, holds: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """The submission's state in popcorn-cli's words, and what went wrong.

    A ranked submission succeeds only as the ranking decides: its public run scored and its
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


def submission_summary(report: SubmissionReport, holds: Mapping[str, str]) -> Json:
    """An item of `GET /user/submissions`."""
    stored = report.submission
    return {
        "id": stored.id,
        "leaderboard_name": stored.leaderboard,
        "file_name": stored.file_name,
        "submission_time": iso(stored.submitted_at),
        "mode": stored.mode.value,
        "after_deadline": stored.after_deadline,
        "done": report.done,
        "status": client_status(report, holds)[0],
        "runs": [
            {"gpu_type": r.gpu, "secret": r.secret, "passed": r.passed, "score": r.score}
            for r in report.runs
            if not r.secret
        ],
    }


def submission_view(
    report: SubmissionReport, queue: QueueStatus | None, holds: Mapping[str, str]
) -> Json:
    """`GET /user/submissions/{id}`: everything popcorn-cli's polling reads."""
    stored = report.submission
    jobs = {j.id: j for j in report.jobs}
    status, error = client_status(report, holds)
    return {
        "id": stored.id,
        "leaderboard_id": stored.leaderboard_id,
        "leaderboard_name": stored.leaderboard,
        "file_name": stored.file_name,
        "user_id": stored.user,
        "submission_time": iso(stored.submitted_at),
        "mode": stored.mode.value,
        "after_deadline": stored.after_deadline,  # ranked among runs after the deadline only
        "done": report.done,
        "invalidated": stored.invalidated,  # why an organiser took it out of the rankings
        "code": stored.code,
        "runs": [run_view(r, jobs.get(r.job_id)) for r in report.runs],
        "jobs": [job_view(j) for j in report.jobs],
        "job": {"status": status, "error": error, "last_heartbeat": _heartbeat(report.jobs)},
        "runner_queue": None if queue is None else queue_view(queue),
        "report": format_submission_report(report),
    }


def _heartbeat(jobs: tuple[Job, ...]) -> str | None:
    """When a scheduler last showed it was alive for one of these jobs."""
    times = [j.heartbeat_at for j in jobs if j.heartbeat_at is not None]
    return iso(max(times)) if times else None


def run_view(run: RunRecord, job: Job | None) -> Json:
    view: Json = {
        "job_id": run.job_id,
        "start_time": iso(job.dispatched_at if job else None),
        "end_time": iso(run.created_at),
        "mode": run.mode.value,
        "secret": run.secret,
        "runner": run.gpu,
        "gpu_type": run.gpu,
        "verdict": run.verdict.value,
        "score": run.score,
        "passed": run.passed,
        "redacted": run.redacted,
    }
    if run.result and not run.redacted:
        result = RunResult.from_json(run.result)
        view["result"] = key_form(result)
        view["diagnostics"] = diagnostics(result)
        view["run_result"] = run.result  # the RunResult whole: a client renders its own report
        view["speed_of_light"] = speed_of_light(result)
    elif run.result.get("held"):
        view["held"] = run.result["held"]  # a redacted secret run's: that it is held, not why
    return view


def speed_of_light(result: RunResult) -> list[Json]:
    """Each timed case's figures against the speed of light (`core.speed_of_light`), with
    the fraction of peak and the peak that binds it; [] when the task states none."""
    return [
        {"phase": phase.name, "index": b.index, "spec": b.spec, **b.speed.to_json()}
        for phase in result.phases
        for b in phase.benchmarks
        if b.speed is not None
    ]


def key_form(result: RunResult) -> dict[str, str | int]:
    """The run's outcome as the popcorn protocol's `key: value` pairs: values as the protocol
    writes them, the counts as numbers (popcorn-cli reads them as integers)."""
    keys: dict[str, str | int] = {}
    if result.tests:
        keys["test-count"] = len(result.tests)
    for t in result.tests:
        prefix = f"test.{t.index}."
        keys |= {prefix + "spec": t.spec, prefix + "status": "pass" if t.passed else "fail"}
        if t.message:
            keys[prefix + "message"] = t.message
        if t.error:
            keys[prefix + "error"] = t.error
    if result.benchmarks:
        keys["benchmark-count"] = len(result.benchmarks)
    for b in result.benchmarks:
        prefix = f"benchmark.{b.index}."
        keys |= {prefix + "spec": b.spec, prefix + "status": "pass" if b.passed else "fail"}
        if b.passed:
            keys |= {
                prefix + k: repr(float(getattr(b, k))) for k in ("mean", "err", "best", "worst")
            }
        if b.error:
            keys[prefix + "error"] = b.error
    keys["check"] = "pass" if result.passed else "fail"
    return keys


def diagnostics(result: RunResult) -> Json:
    """What the main phase printed and how it ended; the compiler's output, if it ran."""
    phase = result.phases[-1] if result.phases else None
    compilation = result.compilation
    return {
        "stdout": phase.stdout if phase else "",
        "stderr": phase.stderr if phase else "",
        "exit_code": phase.exit_code if phase else None,
        "success": result.passed,
        "duration": sum(p.duration_s for p in result.phases),
        "message": result.message,
        "compilation": None
        if compilation is None
        else {"success": compilation.success, "stdout": "", "stderr": compilation.output},
    }
