"""What front ends hand the service (who acts) and what it hands back (receipts, reports)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from cluster_manager.core.models import Mode
from cluster_manager.core.records import EventState, Job, JobState, RunRecord
from cluster_manager.storage.queue import GpuQueue, OpenJob
from cluster_manager.storage.submissions import StoredSubmission

TERMINAL_STATES = {JobState.FINISHED, JobState.FAILED}
TERMINAL_EVENTS = {EventState.of(state) for state in TERMINAL_STATES}


@dataclass(frozen=True)
class Submitter:
    """Who acts: a stable id from the front end (Discord id, CLI user name) and a name."""

    external_id: str
    name: str


@dataclass(frozen=True)
class SubmissionReceipt:
    submission_id: int
    leaderboard: str
    user: str
    file_name: str
    mode: Mode
    jobs: tuple[Job, ...]
    after_deadline: bool = False  # ranked, if at all, among the runs after the deadline


@dataclass(frozen=True)
class SubmissionReport:
    submission: StoredSubmission
    jobs: tuple[Job, ...]
    runs: tuple[RunRecord, ...]  # secret runs carry no result details

    @property
    def done(self) -> bool:
        return all(j.state in TERMINAL_STATES for j in self.jobs)

    @property
    def passed(self) -> bool:
        """Every job has its run and every run passed (a failed job has no run)."""
        runs = self.runs
        return bool(runs) and len(runs) == len(self.jobs) and all(r.passed for r in runs)


@dataclass(frozen=True)
class QueueStatus:
    """A GPU type's queue as a client sees it: who runs it, what waits, what runs."""

    gpu: str
    launcher: str
    queued: int
    running: int


@dataclass(frozen=True)
class QueueView:
    """`/queue`: every GPU type's line, and the caller's own open jobs in it."""

    gpus: list[GpuQueue]
    mine: list[OpenJob]

    def to_json(self) -> dict[str, Any]:
        return {"gpus": [asdict(g) for g in self.gpus], "mine": [asdict(j) for j in self.mine]}
