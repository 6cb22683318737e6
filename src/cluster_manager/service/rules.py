"""Rules every front end shares: deadlines, who may delete, what a launcher allows, what a
secret run (its record, its job, its live events) may show."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.guarantees import fresh_inputs_problem
from cluster_manager.core.models import Limits, Task, Verdict
from cluster_manager.core.phases import longest_run_s
from cluster_manager.core.records import EventState, Job, JobEvent, Leaderboard, RunRecord
from cluster_manager.core.wording import utc_minute
from cluster_manager.service.errors import (
    DeadlinePassedError,
    GpuNotAllowedError,
    InvalidDeadlineError,
    PermissionDeniedError,
)
from cluster_manager.service.receipts import Submitter

# Postgres's timestamptz and Python's datetime both end before year 10000, in every zone.
LATEST_DEADLINE_YEAR = 9998


def parse_deadline(raw: str) -> datetime:
    """ISO 8601; a deadline without a time zone is taken as UTC."""
    try:
        deadline = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise InvalidDeadlineError(
            f"cannot read deadline {raw!r}: use ISO 8601, e.g. 2026-12-31T23:59:00+00:00"
        ) from None
    deadline = deadline if deadline.tzinfo else deadline.replace(tzinfo=UTC)
    try:
        in_utc = deadline.astimezone(UTC)
    except OverflowError:
        in_utc = None
    if in_utc is None or in_utc.year > LATEST_DEADLINE_YEAR:
        raise InvalidDeadlineError(
            f"deadline {raw!r} is too far away: the latest is the end of {LATEST_DEADLINE_YEAR}"
        )
    return deadline


def check_may_delete(board: Leaderboard, actor: Submitter | None, *, admin: bool) -> None:
    """Admins may delete any leaderboard; anybody else only one they created."""
    if not admin and (actor is None or board.creator != actor.external_id):
        raise PermissionDeniedError(f"only admins or the creator of {board.name!r} may delete it")


def check_standings_open(board: Leaderboard, now: datetime, change: str) -> None:
    """The competition's final standings are fixed at the deadline: an author's deletion of a
    ranked submission after it would drop a final entry (the ranking, its history and its
    exports), so it is refused with why rather than let it rewrite them. Team changes need no
    such refusal: the competition's ranking reads the teams as at its deadline
    (storage.rankings). Organisers keep their own tools (invalidation, an admin's delete,
    moving the deadline)."""
    if not board.is_open(now):
        raise DeadlinePassedError(
            f"the deadline of {board.name!r} passed at {utc_minute(board.deadline)}: "
            f"its final standings are fixed, so you cannot {change} any more"
        )


def check_run_fits(task: Task, gpu: GpuType) -> None:
    """A task whose runs may outlast what the GPU type's launcher allows would end as the
    launcher's cancellation, not a timeout verdict: refused up front, with the limit named."""
    limit = gpu.max_run_s
    longest = longest_run_s(task, gpu.run_limits(Limits()))
    if limit is not None and longest > limit:
        raise GpuNotAllowedError(
            f"{gpu.name}: a run of this task may take {longest / 60:.0f} min (its phases' "
            f"timeouts, grace and start-up), over the {limit / 60:.0f} min the {gpu.launcher} "
            "launcher allows; lower test_timeout, benchmark_timeout or ranked_timeout"
        )


def check_devices(task: Task, gpu: GpuType) -> None:
    """A multi-GPU task starts one process per device: a machine with fewer cannot run it."""
    if task.processes > gpu.devices:
        raise GpuNotAllowedError(
            f"{gpu.name}: the task runs {task.processes} processes (its largest world_size), "
            f"but a {gpu.name} machine has {gpu.devices} device(s)"
        )


def check_fresh_inputs(task: Task) -> None:
    """A task whose timed iterations would all time the same inputs ranks whoever caches
    answers: refused, with what to change. Read from the task's files, never by running them."""
    problem = fresh_inputs_problem(task)
    if problem:
        raise InvalidTaskError("task.yml", "benchmarks", problem)


# What a secret run's author reads when it keeps its pair out of the ranking.
HELD_RERUN = "not ranked: the secret re-run is held (its reason is for admins)"


def redact(run: RunRecord) -> RunRecord:
    """A secret run as its author sees it: passed or failed, and whether it is held out of
    the ranking (which "not ranked" tells anyway). Its inputs derive from the secret seed,
    and so do its verdict's kind, score, timings, messages and why it was held: each would
    carry bits of the seed out, a submission at a time. Admins read runs unredacted."""
    if not run.secret:
        return run
    verdict = Verdict.PASSED if run.passed else Verdict.FAILED
    held = {"held": HELD_RERUN} if run.passed and run.result.get("review") else {}
    return replace(run, verdict=verdict, result=held, score=None, redacted=True)


def redact_job(job: Job) -> Job:
    """A secret job's error can quote its run's output: its author sees that it failed."""
    return replace(job, error=None) if job.secret and job.error else job


def redact_event(event: JobEvent) -> JobEvent | None:
    """A secret job's live event as its author sees it: its state, its verdict as passed or
    failed, no detail (a message, a retry's reason); None for its phases, whose start times
    would time the secret inputs. Which launcher took it is no secret."""
    if not event.secret:
        return event
    if event.state is EventState.RUNNING:
        return None
    verdict = None if event.verdict is None else "passed" if event.verdict == "passed" else "failed"
    detail = event.detail if event.state is EventState.DISPATCHED else ""
    return replace(event, verdict=verdict, detail=detail)
