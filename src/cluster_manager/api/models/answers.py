"""The API's small answers: a refusal's detail, health, the queue, and what an action did
(`{"status": ..., <what it acted on>}`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cluster_manager.api.models.base import ApiModel
from cluster_manager.service import QueueView
from cluster_manager.service.port import GpuQueue, OpenJob


def media_answer(media_type: str, description: str) -> dict[int | str, dict[str, Any]]:
    """How a route whose answer is no JSON (a stream, a file, text) states it in the OpenAPI
    schema, in `responses=`: its media type and what it holds."""
    content = {media_type: {"schema": {"type": "string"}}}
    return {200: {"description": description, "content": content}}


class Detail(ApiModel):
    """Every refusal, and popcorn-cli's `register`, which this server does not take."""

    detail: str


class Health(ApiModel):
    """The database's round trip, and the GPU types a live scheduler runs."""

    status: Literal["ok"] = "ok"
    database_ms: float
    served_gpus: list[str]


class GpuQueueView(ApiModel):
    gpu: str
    queued: int
    running: int
    served: bool  # a live scheduler has said it runs this type

    @classmethod
    def of(cls, queue: GpuQueue) -> GpuQueueView:
        return cls(gpu=queue.gpu, queued=queue.queued, running=queue.running, served=queue.served)

    def to_record(self) -> GpuQueue:
        return GpuQueue(self.gpu, self.queued, self.running, self.served)


class OpenJobView(ApiModel):
    job_id: int
    submission_id: int
    leaderboard: str
    gpu: str
    secret: bool
    state: str  # queued, claimed or dispatched
    position: int | None  # in its GPU's line, while queued

    @classmethod
    def of(cls, job: OpenJob) -> OpenJobView:
        return cls(
            job_id=job.job_id,
            submission_id=job.submission_id,
            leaderboard=job.leaderboard,
            gpu=job.gpu,
            secret=job.secret,
            state=job.state,
            position=job.position,
        )

    def to_record(self) -> OpenJob:
        return OpenJob(
            self.job_id,
            self.submission_id,
            self.leaderboard,
            self.gpu,
            self.secret,
            self.state,
            self.position,
        )


class QueuesView(ApiModel):
    """`GET /queue`: every GPU type's line; with a user's token, their own open jobs."""

    gpus: list[GpuQueueView]
    mine: list[OpenJobView] = Field(default_factory=list)  # an older server has none

    @classmethod
    def of(cls, view: QueueView) -> QueuesView:
        return cls(
            gpus=[GpuQueueView.of(g) for g in view.gpus],
            mine=[OpenJobView.of(j) for j in view.mine],
        )

    def to_record(self) -> QueueView:
        return QueueView([g.to_record() for g in self.gpus], [j.to_record() for j in self.mine])


class Joined(ApiModel):
    """`POST /user/join`: the invite-only leaderboard the code opened."""

    leaderboard: str
    status: Literal["joined", "already a member"]

    @property
    def newly(self) -> bool:
        return self.status == "joined"


class SubmissionDone(ApiModel):
    """A submission deleted, invalidated or restored."""

    status: Literal["deleted", "invalidated", "restored"]
    id: int


class LeaderboardDone(ApiModel):
    """A leaderboard deleted, made invite-only or opened."""

    status: Literal["deleted", "invite-only", "open"]
    leaderboard: str


class UserDone(ApiModel):
    """A user's ban lifted or quota override cleared, or that there was none."""

    status: Literal["unbanned", "not banned", "cleared", "had none"]
    user: str


class InviteRevoked(ApiModel):
    status: Literal["revoked", "unknown or already revoked"]
    code: str

    @property
    def revoked(self) -> bool:
        return self.status == "revoked"
