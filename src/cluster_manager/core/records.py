"""What the service stores and shows: leaderboards, submissions, jobs, runs and rankings."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode, Task, Verdict

LEADERBOARD_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
MAX_NAME_LENGTH = 64


class InvalidNameError(ClusterManagerError):
    """A leaderboard or team name too long or with characters a name may not hold."""


def check_leaderboard_name(name: str) -> str:
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"leaderboard name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
        )
    if not LEADERBOARD_NAME.fullmatch(name):
        raise InvalidNameError(
            f"leaderboard name {name!r} may only hold lower-case letters, digits, '_' and '-', "
            "and must start with a letter or digit"
        )
    return name


class JobState(enum.StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"  # a worker holds the lease and is about to dispatch
    DISPATCHED = "dispatched"  # the launcher has it; external_id names the remote run
    FINISHED = "finished"  # its run is recorded
    FAILED = "failed"  # gave up (launcher errors, lost run); error says why


IN_FLIGHT_STATES = (JobState.CLAIMED, JobState.DISPATCHED)  # the states a lease covers


class EventState(enum.StrEnum):
    """What a job event tells: a job's state, or that its run is under way on the runner."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    DISPATCHED = "dispatched"
    RUNNING = "running"  # not stored: the runner reported a phase (detail says which)
    FINISHED = "finished"
    FAILED = "failed"

    @classmethod
    def of(cls, state: JobState) -> EventState:
        return cls(state.value)


def dispatch_key(installation: str, name: str) -> str:
    """A launcher's idempotency key. `name` (job 7, attempt 1) is unique in one database
    only; the installation id makes it unique among all databases that share a launcher (a
    runner repository, a Slurm directory), so none takes another's run for its own."""
    return f"{installation}-{name}"


class ChannelPolicy(enum.StrEnum):
    """What the bot posts in a leaderboard's channel of its submissions (a submission's status,
    output and files are always its submitter's own): `ranked` a ranked submission's verdict
    and places, `none` nothing (announcements of new leaders go on), `all` every submission's
    verdict line, whatever its mode; never its output."""

    RANKED = "ranked"
    NONE = "none"
    ALL = "all"

    def publishes(self, mode: Mode) -> bool:
        """Whether the channel sees the verdict of a submission in `mode`."""
        return self is ChannelPolicy.ALL or (
            self is ChannelPolicy.RANKED and mode is Mode.LEADERBOARD
        )


@dataclass(frozen=True)
class Leaderboard:
    id: int
    name: str
    deadline: datetime
    description: str
    task: Task
    gpus: tuple[str, ...]
    creator: str | None
    created_at: datetime
    rate_limit_per_hour: int | None = None
    closed: bool = False  # invite-only: listed to and submittable by its members only
    channel_policy: ChannelPolicy = ChannelPolicy.RANKED
    # Past the deadline, runs go on when the organiser allows them: ranked on their own, never
    # in the competition's ranking or its announcements.
    after_deadline_runs: bool = True
    team_size: int = 4  # the most members a team may have
    team_quotas: bool = False  # the hourly quota counts a team's submissions together

    def is_open(self, now: datetime) -> bool:
        return now < self.deadline

    def takes_submissions(self, now: datetime) -> bool:
        """Before its deadline, or after it where runs after the deadline are allowed."""
        return self.is_open(now) or self.after_deadline_runs

    def publishes(self, mode: Mode) -> bool:
        """Whether the channel sees a submission's verdict in `mode`: as the channel policy
        says, and never for an invite-only leaderboard (a line would tell the channel it
        exists, and its ranking is its members')."""
        return not self.closed and self.channel_policy.publishes(mode)


@dataclass(frozen=True)
class LeaderboardSummary:
    name: str
    deadline: datetime
    gpus: tuple[str, ...]
    submissions: int
    invite_only: bool = False  # `Leaderboard.closed`


@dataclass(frozen=True)
class User:
    id: int
    external_id: str
    name: str


@dataclass(frozen=True)
class Job:
    id: int
    submission_id: int
    gpu: str
    mode: Mode
    secret: bool
    state: JobState
    launcher: str | None
    external_id: str | None
    attempts: int
    lease_owner: str | None
    error: str | None = None
    dispatched_at: datetime | None = None
    heartbeat_at: datetime | None = None  # the last time its scheduler renewed its lease


@dataclass(frozen=True)
class ScorePoint:
    """A user's best score on a leaderboard and GPU improved to `score` (seconds) at `at`."""

    user: str
    score: float
    at: datetime


@dataclass(frozen=True)
class HistoryKey:
    """One state of a ranking's history: what is derived from it (charts) is cached by this."""

    leaderboard: str
    gpu: str
    version: int  # changes whenever the leaderboard's history does


@dataclass(frozen=True)
class ScoreHistory:
    leaderboard: str
    gpu: str
    points: tuple[ScorePoint, ...]  # oldest first
    version: int  # changes whenever the leaderboard's history does (cache key)

    @property
    def key(self) -> HistoryKey:
        return HistoryKey(self.leaderboard, self.gpu, self.version)


@dataclass(frozen=True)
class RankingEntry:
    rank: int
    user: str
    score: float  # seconds
    submission_id: int
    submitted_at: datetime
    name: str = ""  # the user's name as last seen (a Discord member's display name)
    team: str | None = None  # the entry is this team's, whose best is `user`'s submission


@dataclass(frozen=True)
class Placement:
    """Where a ranked submission stands on one GPU."""

    gpu: str
    rank: int | None  # None: not ranked (yet)
    score: float | None
    improved: bool  # this submission is now the user's best on this GPU
    previous_best: float | None
    after_deadline: bool = False  # the rank is in the ranking of runs after the deadline


@dataclass(frozen=True)
class RunRecord:
    job_id: int
    submission_id: int
    leaderboard: str
    user: str
    gpu: str
    mode: Mode
    secret: bool
    passed: bool
    verdict: Verdict
    score: float | None
    file_name: str
    submitted_at: datetime
    created_at: datetime
    result: dict[str, Any] = field(default_factory=dict, repr=False)
    # As a secret run's author sees it: passed or failed, and `result` holds at most `held`,
    # the fact (never the reason) that it keeps its pair out of the ranking.
    redacted: bool = False


@dataclass(frozen=True)
class JobEvent:
    """A transition of one job, as published to subscribers (front ends render these)."""

    job_id: int
    submission_id: int
    gpu: str
    secret: bool
    state: EventState
    detail: str = ""
    position: int | None = None  # place in the queue for its GPU, 1 = next
    verdict: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobEvent:
        return cls(**{**data, "state": EventState(data["state"])})

    @classmethod
    def of_job(
        cls, job: Job, *, verdict: str | None = None, position: int | None = None
    ) -> JobEvent:
        """The event that describes a job's stored state (late subscribers, polling)."""
        state = EventState.of(job.state)
        # A dispatched job names its launcher, as the live event does ("dispatched to local").
        named = job.launcher if state is EventState.DISPATCHED else None
        return cls(
            job.id,
            job.submission_id,
            job.gpu,
            job.secret,
            state,
            detail=job.error or named or "",
            position=position,
            verdict=verdict,
        )
