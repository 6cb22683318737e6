"""Submissions as the API shows them: what a submit answers (popcorn-cli reads `details`
and `runner_queue`; `receipt` is ours), a user's list of them, and one with its runs, jobs
and placements (everything popcorn-cli's polling reads)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from cluster_manager.api.client_status import client_status
from cluster_manager.api.models.base import ApiModel, Moment, left_out_when_none
from cluster_manager.api.models.runs import RunView
from cluster_manager.core.models import Mode
from cluster_manager.core.records import Job, JobState, Placement
from cluster_manager.rendering.reports import format_submission_report
from cluster_manager.service import QueueStatus, SubmissionReceipt, SubmissionReport
from cluster_manager.service.port import StoredSubmission


class JobView(ApiModel):
    """A job as its submitter sees it: not where its run lives, which worker holds it or how
    often it was tried (a secret job's retries could tell of its run)."""

    id: int
    submission_id: int
    gpu: str
    mode: Mode
    secret: bool
    state: JobState
    launcher: str | None
    error: str | None
    dispatched_at: Moment | None
    heartbeat_at: Moment | None

    @classmethod
    def of(cls, job: Job) -> JobView:
        return cls(
            id=job.id,
            submission_id=job.submission_id,
            gpu=job.gpu,
            mode=job.mode,
            secret=job.secret,
            state=job.state,
            launcher=job.launcher,
            error=job.error,
            dispatched_at=job.dispatched_at,
            heartbeat_at=job.heartbeat_at,
        )

    def to_record(self) -> Job:
        """What stays on the server reads as a job's neutral values."""
        return Job(
            id=self.id,
            submission_id=self.submission_id,
            gpu=self.gpu,
            mode=self.mode,
            secret=self.secret,
            state=self.state,
            launcher=self.launcher,
            external_id=None,
            attempts=0,
            lease_owner=None,
            error=self.error,
            dispatched_at=self.dispatched_at,
            heartbeat_at=self.heartbeat_at,
        )


class ReceiptView(ApiModel):
    """Ours: what a submission just stored is, its id, who submitted it, the jobs it queued."""

    submission_id: int
    leaderboard: str
    user: str
    file_name: str
    mode: Mode
    jobs: list[JobView]
    after_deadline: bool = False

    @classmethod
    def of(cls, receipt: SubmissionReceipt) -> ReceiptView:
        return cls(
            submission_id=receipt.submission_id,
            leaderboard=receipt.leaderboard,
            user=receipt.user,
            file_name=receipt.file_name,
            mode=receipt.mode,
            jobs=[JobView.of(j) for j in receipt.jobs],
            after_deadline=receipt.after_deadline,
        )

    def to_record(self) -> SubmissionReceipt:
        return SubmissionReceipt(
            self.submission_id,
            self.leaderboard,
            self.user,
            self.file_name,
            self.mode,
            tuple(j.to_record() for j in self.jobs),
            after_deadline=self.after_deadline,
        )


class RunnerQueue(ApiModel):
    """A GPU type's queue: who runs it, what waits, what runs."""

    runner: str
    gpu: str
    queued_jobs: int
    running_jobs: int

    @classmethod
    def of(cls, queue: QueueStatus) -> RunnerQueue:
        return cls(
            runner=queue.launcher,
            gpu=queue.gpu,
            queued_jobs=queue.queued,
            running_jobs=queue.running,
        )


class AcceptedDetails(ApiModel):
    id: int
    job_status_id: int


class SubmitAccepted(ApiModel):
    """`POST /submission/...`: accepted at once; the client polls `GET /user/submissions/{id}`."""

    status: Literal["accepted"] = "accepted"
    details: AcceptedDetails
    runner_queue: RunnerQueue
    receipt: ReceiptView

    @classmethod
    def of(cls, receipt: SubmissionReceipt, queue: QueueStatus) -> SubmitAccepted:
        first = receipt.jobs[0]
        return cls(
            details=AcceptedDetails(id=receipt.submission_id, job_status_id=first.id),
            runner_queue=RunnerQueue.of(queue),
            receipt=ReceiptView.of(receipt),
        )


class RunSummary(ApiModel):
    gpu_type: str
    secret: bool
    passed: bool
    score: float | None


class SubmissionSummary(ApiModel):
    """An item of `GET /user/submissions`: its public runs only."""

    id: int
    leaderboard_name: str
    file_name: str
    submission_time: Moment
    mode: Mode
    after_deadline: bool
    done: bool
    status: str
    runs: list[RunSummary]

    @classmethod
    def of(cls, report: SubmissionReport, holds: Mapping[str, str]) -> SubmissionSummary:
        stored = report.submission
        return cls(
            id=stored.id,
            leaderboard_name=stored.leaderboard,
            file_name=stored.file_name,
            submission_time=stored.submitted_at,
            mode=stored.mode,
            after_deadline=stored.after_deadline,
            done=report.done,
            status=client_status(report, holds)[0],
            runs=[
                RunSummary(gpu_type=r.gpu, secret=r.secret, passed=r.passed, score=r.score)
                for r in report.runs
                if not r.secret
            ],
        )


class JobStatus(ApiModel):
    """The submission's state in popcorn-cli's words, what went wrong, and when a scheduler
    last showed it was alive for one of its jobs."""

    status: str
    error: str | None
    last_heartbeat: Moment | None

    @classmethod
    def of(cls, report: SubmissionReport, holds: Mapping[str, str]) -> JobStatus:
        status, error = client_status(report, holds)
        beats = [j.heartbeat_at for j in report.jobs if j.heartbeat_at is not None]
        return cls(status=status, error=error, last_heartbeat=max(beats) if beats else None)


class PlacementView(ApiModel):
    """Where a ranked submission stands on one GPU (`rank` null: not ranked yet)."""

    gpu: str
    rank: int | None
    score: float | None
    improved: bool
    previous_best: float | None
    after_deadline: bool = False

    @classmethod
    def of(cls, placement: Placement) -> PlacementView:
        return cls(
            gpu=placement.gpu,
            rank=placement.rank,
            score=placement.score,
            improved=placement.improved,
            previous_best=placement.previous_best,
            after_deadline=placement.after_deadline,
        )

    def to_record(self) -> Placement:
        return Placement(
            gpu=self.gpu,
            rank=self.rank,
            score=self.score,
            improved=self.improved,
            previous_best=self.previous_best,
            after_deadline=self.after_deadline,
        )


class SubmissionView(ApiModel):
    """`GET /user/submissions/{id}`. Users are named by their id as the bot or the CLI knows
    them (`user_id`), never by the database's key. `placements` only once a ranked submission
    is done."""

    id: int
    leaderboard_id: int
    leaderboard_name: str
    file_name: str
    user_id: str
    submission_time: Moment
    mode: Mode
    after_deadline: bool = False  # ranked among the runs after the deadline only
    done: bool
    invalidated: str | None  # why an organiser took it out of the rankings
    code: str
    runs: list[RunView]
    jobs: list[JobView]
    job: JobStatus
    runner_queue: RunnerQueue | None
    report: str
    placements: list[PlacementView] | None = left_out_when_none()

    @classmethod
    def of(
        cls,
        report: SubmissionReport,
        queue: QueueStatus | None,
        holds: Mapping[str, str],
        placements: Sequence[Placement] | None = None,
    ) -> SubmissionView:
        stored = report.submission
        jobs = {j.id: j for j in report.jobs}
        return cls(
            id=stored.id,
            leaderboard_id=stored.leaderboard_id,
            leaderboard_name=stored.leaderboard,
            file_name=stored.file_name,
            user_id=stored.user,
            submission_time=stored.submitted_at,
            mode=stored.mode,
            after_deadline=stored.after_deadline,
            done=report.done,
            invalidated=stored.invalidated,
            code=stored.code,
            runs=[RunView.of(r, jobs.get(r.job_id)) for r in report.runs],
            jobs=[JobView.of(j) for j in report.jobs],
            job=JobStatus.of(report, holds),
            runner_queue=None if queue is None else RunnerQueue.of(queue),
            report=format_submission_report(report),
            placements=None if placements is None else [PlacementView.of(p) for p in placements],
        )

    def to_submission(self) -> StoredSubmission:
        return StoredSubmission(
            id=self.id,
            leaderboard_id=self.leaderboard_id,
            leaderboard=self.leaderboard_name,
            user_id=0,  # the database's key stays on the server
            user=self.user_id,
            file_name=self.file_name,
            code=self.code,
            mode=self.mode,
            submitted_at=self.submission_time,
            invalidated=self.invalidated,
            after_deadline=self.after_deadline,
        )

    def to_report(self) -> SubmissionReport:
        submission = self.to_submission()
        return SubmissionReport(
            submission,
            tuple(j.to_record() for j in self.jobs),
            tuple(r.to_record(submission) for r in self.runs),
        )

    def placement_records(self) -> list[Placement]:
        return [p.to_record() for p in self.placements or ()]
