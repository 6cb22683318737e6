"""What syncing a problem set would do to each leaderboard: create it, leave it, or change
its deadline, GPU types or task; and which task changes make its stored scores incomparable
(the files, cases, timeouts or ranking rule the scores were measured with)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from cluster_manager.core.models import Task
from cluster_manager.core.records import Leaderboard


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class ProblemSpec:
    """One problem of a competition file, loaded and checked."""

    name: str
    task: Task
    deadline: datetime
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Change:
    what: str  # deadline, gpus, task file NAME, tests, ...
    detail: str
    invalidates_scores: bool = False


@dataclass(frozen=True)
class PlanItem:
    spec: ProblemSpec
    action: Action
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()  # unknown GPU types left out, and such

    @property
    def needs_force(self) -> bool:
        """Scores stored so far were measured against something else, or a GPU's ranking
        would disappear: applied only when the organiser says so."""
        return any(c.invalidates_scores for c in self.changes)


@dataclass(frozen=True)
class SyncPlan:
    items: tuple[PlanItem, ...]
    skipped: tuple[str, ...] = field(default=())  # problems left out entirely, with why

    def held(self, force: bool) -> list[PlanItem]:
        return [] if force else [i for i in self.items if i.needs_force]


def plan_item(board: Leaderboard | None, spec: ProblemSpec, notes: Sequence[str]) -> PlanItem:
    if board is None:
        return PlanItem(spec, Action.CREATE, notes=tuple(notes))
    changes = [*_board_changes(board, spec), *task_changes(board.task, spec.task)]
    action = Action.UPDATE if changes else Action.UNCHANGED
    return PlanItem(spec, action, tuple(changes), tuple(notes))


def _board_changes(board: Leaderboard, spec: ProblemSpec) -> list[Change]:
    changes = []
    if board.deadline != spec.deadline:
        old, new = board.deadline.isoformat(), spec.deadline.isoformat()
        changes.append(Change("deadline", f"{old} → {new}"))
    added = sorted(set(spec.gpus) - set(board.gpus))
    removed = sorted(set(board.gpus) - set(spec.gpus))
    if added:
        changes.append(Change("gpus", f"adds {', '.join(added)}"))
    if removed:
        # Its ranking (and everything run on it) would no longer be shown.
        changes.append(Change("gpus", f"removes {', '.join(removed)}", invalidates_scores=True))
    return changes


def task_changes(old: Task, new: Task) -> list[Change]:
    """Differences between two versions of a task, each saying whether scores measured with
    the old one still compare with the new one's."""
    changes = []
    old_files = {f.name: f.content for f in old.files}
    new_files = {f.name: f.content for f in new.files}
    for name in sorted(old_files.keys() | new_files.keys()):
        if name not in old_files:
            changes.append(Change(f"task file {name}", "added", invalidates_scores=True))
        elif name not in new_files:
            changes.append(Change(f"task file {name}", "removed", invalidates_scores=True))
        elif old_files[name] != new_files[name]:
            changes.append(Change(f"task file {name}", "changed", invalidates_scores=True))
    measured: dict[str, tuple[object, object]] = {
        "tests": (old.tests, new.tests),
        "benchmarks": (old.benchmarks, new.benchmarks),
        "language": (old.lang, new.lang),
        "harness (main)": (old.main, new.main),
        "CUDA settings": (old.cuda, new.cuda),
        "ranking rule": (old.ranking_by, new.ranking_by),
        "multi-GPU": (old.multi_gpu, new.multi_gpu),
    }
    # What a run is allowed or how a result is reviewed: scores already ranked still hold.
    settings: dict[str, tuple[object, object]] = {
        "timeouts": (
            (old.test_timeout, old.benchmark_timeout, old.ranked_timeout),
            (new.test_timeout, new.benchmark_timeout, new.ranked_timeout),
        ),
        "score floors": (old.floors_us, new.floors_us),
        "speed of light": (old.speed_of_light, new.speed_of_light),
        "description": (old.description, new.description),
        "templates": (old.templates, new.templates),
    }
    for what, (before, after) in measured.items():
        if before != after:
            changes.append(Change(what, "changed", invalidates_scores=True))
    for what, (before, after) in settings.items():
        if before != after:
            changes.append(Change(what, "changed"))
    return changes
