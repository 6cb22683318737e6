"""The HTTP API's JSON read back into the records `Service` answers with: one function per
type, each the inverse of the shape the server writes (`api/json_shapes.py`, the `to_json`
of the records). A field the API never shows gets its record's neutral value, said where."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cluster_manager.core.models import Mode, Task, Verdict
from cluster_manager.core.records import (
    ChannelPolicy,
    Job,
    JobEvent,
    JobState,
    Leaderboard,
    LeaderboardSummary,
    Placement,
    RankingEntry,
    RunRecord,
)
from cluster_manager.core.teams import Team
from cluster_manager.service.port import (
    AfterDeadlineRefusal,
    Ban,
    ChannelPolicySetting,
    CustomQuota,
    GpuQueue,
    GpuStats,
    Invite,
    OpenJob,
    Pause,
    Stats,
    StoredSubmission,
    UserQuotas,
)
from cluster_manager.service.receipts import QueueView, SubmissionReceipt, SubmissionReport

Json = dict[str, Any]


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _maybe_when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def leaderboard(view: Json, task: Task) -> Leaderboard:
    """`GET /leaderboards/{name}`, with the task read from its files (the view has only a
    summary of it). Its creator and own rate limit are the server's to know."""
    return Leaderboard(
        id=view["id"],
        name=view["name"],
        deadline=_when(view["deadline"]),
        description=view["description"],
        task=task,
        gpus=tuple(view["gpu_types"]),
        creator=None,
        created_at=_when(view["created_at"]),
        closed=bool(view["invite_only"]),
        channel_policy=ChannelPolicy(view.get("channel_policy", ChannelPolicy.RANKED.value)),
        # A server that predates runs after the deadline shows no switch: taken is the default.
        after_deadline_runs=bool(view.get("after_deadline_runs", True)),
        # A server that predates teams shows no rules: the record's defaults.
        team_size=int(view.get("team_size", Leaderboard.team_size)),
        team_quotas=bool(view.get("team_quotas", False)),
    )


def after_deadline_refusal(view: Json) -> AfterDeadlineRefusal:
    """An item of `GET /admin/after-deadline-refusals`."""
    at = view.get("set_at")
    return AfterDeadlineRefusal(view["leaderboard"], view["set_by"], _when(at) if at else None)


def channel_policy_setting(view: Json) -> ChannelPolicySetting:
    """An item of `GET /admin/channel-policies`."""
    return ChannelPolicySetting(
        view["leaderboard"], ChannelPolicy(view["policy"]), view["set_by"], _when(view["set_at"])
    )


def leaderboard_summary(view: Json) -> LeaderboardSummary:
    """An item of `GET /leaderboards`."""
    return LeaderboardSummary(
        view["name"],
        _when(view["deadline"]),
        tuple(view["gpu_types"]),
        view["submissions"],
        invite_only=bool(view["invite_only"]),
    )


def ranking_entry(view: Json) -> RankingEntry:
    return RankingEntry(
        view["rank"],
        view["user"],
        view["score"],
        view["submission_id"],
        _when(view["submission_time"]),
        team=view.get("team"),  # absent from a server that predates teams
    )


def team(view: Json) -> Team:
    """`Team.to_json`, as the team routes answer with it."""
    return Team(
        view["leaderboard"],
        view["name"],
        tuple(view["members"]),
        _when(view["created_at"]),
        view["size_limit"],
    )


def rankings(view: Json) -> dict[str, list[RankingEntry]]:
    """`GET /leaderboards/{name}`'s rankings, per GPU."""
    return {gpu: [ranking_entry(e) for e in entries] for gpu, entries in view["rankings"].items()}


def job(view: Json) -> Job:
    """`json_shapes.job_view`: where a job's run lives, who holds it and how often it was
    tried stay on the server."""
    return Job(
        id=view["id"],
        submission_id=view["submission_id"],
        gpu=view["gpu"],
        mode=Mode(view["mode"]),
        secret=view["secret"],
        state=JobState(view["state"]),
        launcher=view["launcher"],
        external_id=None,
        attempts=0,
        lease_owner=None,
        error=view["error"],
        dispatched_at=_maybe_when(view["dispatched_at"]),
        heartbeat_at=_maybe_when(view["heartbeat_at"]),
    )


def receipt(view: Json) -> SubmissionReceipt:
    """`json_shapes.receipt_view`, in the answer to `POST /submission/...`."""
    return SubmissionReceipt(
        view["submission_id"],
        view["leaderboard"],
        view["user"],
        view["file_name"],
        Mode(view["mode"]),
        tuple(job(j) for j in view["jobs"]),
        after_deadline=bool(view.get("after_deadline", False)),
    )


def job_event(view: Json) -> JobEvent:
    """A `job` event of `GET /submissions/{id}/events`."""
    return JobEvent.from_json(view)


def stored_submission(view: Json) -> StoredSubmission:
    """`GET /user/submissions/{id}`'s submission. The API names users by their id as the
    bot or the CLI knows them, never by the database's key (`user_id` 0)."""
    return StoredSubmission(
        id=view["id"],
        leaderboard_id=view["leaderboard_id"],
        leaderboard=view["leaderboard_name"],
        user_id=0,
        user=view["user_id"],
        file_name=view["file_name"],
        code=view["code"],
        mode=Mode(view["mode"]),
        submitted_at=_when(view["submission_time"]),
        invalidated=view["invalidated"],
        after_deadline=bool(view.get("after_deadline", False)),
    )


def run_record(view: Json, submission: StoredSubmission) -> RunRecord:
    """A run of `GET /user/submissions/{id}`: the whole RunResult where the caller may read
    it, else (a secret run, redacted) only whether it passed and is held."""
    result = view.get("run_result") or ({"held": view["held"]} if view.get("held") else {})
    return RunRecord(
        job_id=view["job_id"],
        submission_id=submission.id,
        leaderboard=submission.leaderboard,
        user=submission.user,
        gpu=view["gpu_type"],
        mode=Mode(view["mode"]),
        secret=view["secret"],
        passed=view["passed"],
        verdict=Verdict(view["verdict"]),
        score=view["score"],
        file_name=submission.file_name,
        submitted_at=submission.submitted_at,
        created_at=_when(view["end_time"]),
        result=result,
        redacted=view["redacted"],
    )


def submission_report(view: Json) -> SubmissionReport:
    """`GET /user/submissions/{id}`."""
    submission = stored_submission(view)
    return SubmissionReport(
        submission,
        tuple(job(j) for j in view["jobs"]),
        tuple(run_record(r, submission) for r in view["runs"]),
    )


def placement(view: Json) -> Placement:
    return Placement(
        gpu=view["gpu"],
        rank=view["rank"],
        score=view["score"],
        improved=view["improved"],
        previous_best=view["previous_best"],
        after_deadline=bool(view.get("after_deadline", False)),
    )


def queue_view(view: Json) -> QueueView:
    """`GET /queue` (`QueueView.to_json`)."""
    return QueueView(
        [GpuQueue(g["gpu"], g["queued"], g["running"], g["served"]) for g in view["gpus"]],
        [
            OpenJob(
                j["job_id"],
                j["submission_id"],
                j["leaderboard"],
                j["gpu"],
                j["secret"],
                j["state"],
                j["position"],
            )
            for j in view.get("mine", [])
        ],
    )


def pause(view: Json) -> Pause:
    return Pause(view["leaderboard"], view["reason"], view["paused_by"], _when(view["paused_at"]))


def ban(view: Json) -> Ban:
    return Ban(
        view["user"], view["name"], view["reason"], view["banned_by"], _when(view["banned_at"])
    )


def invite(view: Json) -> Invite:
    return Invite(
        view["code"],
        view["leaderboard"],
        view["max_uses"],
        view["uses"],
        view["created_by"],
        _when(view["created_at"]),
        view["revoked"],
    )


def custom_quota(view: Json) -> CustomQuota:
    return CustomQuota(
        view["user"],
        view["name"],
        view["per_hour"],
        view["daily"],
        view["set_by"],
        _when(view["set_at"]),
    )


def user_quotas(view: Json) -> UserQuotas:
    return UserQuotas(
        user=view["user"],
        name=view["name"],
        per_hour=view["per_hour"],
        ranked_per_hour=view["ranked_per_hour"],
        daily=view["daily"],
        new_account=view["new_account"],
        custom=None if view["custom"] is None else custom_quota(view["custom"]),
    )


def stats(view: Json) -> Stats:
    return Stats(
        since=_maybe_when(view["since"]),
        submissions=view["submissions"],
        submitters=view["submitters"],
        users=view["users"],
        runs=view["runs"],
        failed_jobs=view["failed_jobs"],
        verdicts=dict(view["verdicts"]),
        gpus={
            gpu: GpuStats(g["runs"], g["queued"], g["running"], g["wait_p50_s"], g["wait_p95_s"])
            for gpu, g in view["gpus"].items()
        },
    )
