"""Leaderboards as the API shows them: a task's summary, a leaderboard, its rankings. The
fields popcorn-cli reads keep its names; ours are said where they are defined.

A leaderboard never shows its secret seed, nor a task its files' contents (`/task` has
those)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, Literal, Self, TypeVar

from pydantic import Field

from cluster_manager.api.models.base import ApiModel, Moment
from cluster_manager.core.models import Case, Language, RankingBy, Task
from cluster_manager.core.records import (
    ChannelPolicy,
    Leaderboard,
    LeaderboardSummary,
    RankingEntry,
)
from cluster_manager.core.scoring import share_of_peak
from cluster_manager.core.speed_of_light import Peaks

Files = TypeVar("Files")


class SpeedOfLightFormulas(ApiModel):
    """Ours: what each benchmark case must do (README, "Task format")."""

    bytes: str | None
    flops: str | None
    precision: str | None


class TaskShape(ApiModel, Generic[Files]):
    """A task as the API shows it: its files by name (`TaskView`) or with their contents
    (`TaskFiles`)."""

    lang: Language
    description: str
    files: Files
    tests: list[Case]
    benchmarks: list[Case]
    ranking_by: RankingBy
    multi_gpu: bool
    templates: list[str]
    speed_of_light: SpeedOfLightFormulas | None


class TaskView(TaskShape[list[str]]):
    """What a competitor may read of a task: its files by name."""

    @classmethod
    def of(cls, task: Task) -> TaskView:
        formulas = task.speed_of_light
        return cls(
            lang=task.lang,
            description=task.description,
            files=[f.name for f in task.files],
            tests=list(task.tests),
            benchmarks=list(task.benchmarks),
            ranking_by=task.ranking_by,
            multi_gpu=task.multi_gpu,
            templates=sorted(task.templates),
            speed_of_light=None
            if formulas is None
            else SpeedOfLightFormulas(
                bytes=formulas.bytes, flops=formulas.flops, precision=formulas.precision
            ),
        )


class TaskFiles(TaskShape[dict[str, str]]):
    """`GET /leaderboards/{name}/task`: the task with its files' contents (the submission's
    slot left out)."""

    @classmethod
    def of(cls, task: Task, files: Mapping[str, str]) -> TaskFiles:
        return cls(**{**dict(TaskView.of(task)), "files": dict(files)})


class LeaderboardView(ApiModel):
    id: int
    name: str
    description: str
    deadline: Moment
    gpu_types: list[str]
    invite_only: bool
    # Ours, each with the value an older server (which shows none) behaves by:
    channel_policy: ChannelPolicy = ChannelPolicy.RANKED
    # whether it takes runs after its deadline (ranked on their own, `after_deadline`);
    after_deadline_runs: bool = True
    # the most members a team may have; whether its members share the hourly quota.
    team_size: int = Leaderboard.team_size
    team_quotas: bool = False
    created_at: Moment
    task: TaskView

    @classmethod
    def of(cls, board: Leaderboard) -> Self:
        return cls(
            id=board.id,
            name=board.name,
            description=board.description or board.task.description,
            deadline=board.deadline,
            gpu_types=list(board.gpus),
            invite_only=board.closed,
            channel_policy=board.channel_policy,
            after_deadline_runs=board.after_deadline_runs,
            team_size=board.team_size,
            team_quotas=board.team_quotas,
            created_at=board.created_at,
            task=TaskView.of(board.task),
        )

    def to_record(self, task: Task) -> Leaderboard:
        """The leaderboard, with its task read from its files (this has a summary of it).
        Its creator and its own rate limit are the server's to know."""
        return Leaderboard(
            id=self.id,
            name=self.name,
            deadline=self.deadline,
            description=self.description,
            task=task,
            gpus=tuple(self.gpu_types),
            creator=None,
            created_at=self.created_at,
            closed=self.invite_only,
            channel_policy=self.channel_policy,
            after_deadline_runs=self.after_deadline_runs,
            team_size=self.team_size,
            team_quotas=self.team_quotas,
        )


class LeaderboardListed(LeaderboardView):
    """An item of `GET /leaderboards`."""

    submissions: int

    @classmethod
    def listed(cls, board: Leaderboard, submissions: int) -> LeaderboardListed:
        return cls(**dict(LeaderboardView.of(board)), submissions=submissions)

    def to_summary(self) -> LeaderboardSummary:
        return LeaderboardSummary(
            self.name,
            self.deadline,
            tuple(self.gpu_types),
            self.submissions,
            invite_only=self.invite_only,
        )


class _Created(ApiModel):
    status: Literal["created"] = "created"


class LeaderboardCreated(LeaderboardView, _Created):
    """`POST /admin/leaderboards`: `status` first, then the leaderboard."""


class RankingEntryView(ApiModel):
    rank: int
    user: str
    # Ours: the team whose entry this is (`user` holds its best), or null.
    team: str | None = None
    score: float
    submission_id: int
    submission_time: Moment
    # Ours: the speed of light's share of the GPU type's peak (null where either states none).
    fraction_of_peak: float | None = None

    @classmethod
    def of(cls, entry: RankingEntry, task: Task, peaks: Peaks | None) -> RankingEntryView:
        return cls(
            rank=entry.rank,
            user=entry.user,
            team=entry.team,
            score=entry.score,
            submission_id=entry.submission_id,
            submission_time=entry.submitted_at,
            fraction_of_peak=share_of_peak(task, peaks, entry.score),
        )

    def to_record(self) -> RankingEntry:
        return RankingEntry(
            self.rank,
            self.user,
            self.score,
            self.submission_id,
            self.submission_time,
            team=self.team,
        )


class PeaksView(ApiModel):
    """A GPU type's peaks: memory bandwidth in GB/s, dense FLOP rates per precision in TFLOP/s;
    `measured` on a CPU runner's machine rather than published."""

    memory_gbs: float | None
    tflops: dict[str, float]
    measured: bool

    @classmethod
    def of(cls, peaks: Peaks) -> PeaksView:
        return cls(memory_gbs=peaks.memory_gbs, tflops=dict(peaks.tflops), measured=peaks.measured)


class RankingView(LeaderboardView):
    """`GET /leaderboards/{name}`: the leaderboard and its ranking per GPU type.
    `after_deadline`: the rankings are those of the runs after the deadline, not the
    competition's. `peaks`: the GPU types' published peaks (ours)."""

    after_deadline: bool = False
    rankings: dict[str, list[RankingEntryView]]
    peaks: dict[str, PeaksView] = Field(default_factory=dict)

    @classmethod
    def ranked(
        cls,
        board: Leaderboard,
        rankings: Mapping[str, list[RankingEntry]],
        peaks: Mapping[str, Peaks],
        *,
        after_deadline: bool = False,
    ) -> RankingView:
        return cls(
            **dict(LeaderboardView.of(board)),
            after_deadline=after_deadline,
            rankings={
                gpu: [RankingEntryView.of(e, board.task, peaks.get(gpu)) for e in entries]
                for gpu, entries in rankings.items()
            },
            peaks={gpu: PeaksView.of(p) for gpu, p in peaks.items()},
        )

    def entries(self) -> dict[str, list[RankingEntry]]:
        return {gpu: [e.to_record() for e in found] for gpu, found in self.rankings.items()}
