"""A problem set's competition file read for syncing: each problem's task loaded, its
deadline read and its GPU types checked against the registry. Unknown GPU types are left out
and reported (never guessed); a problem none of whose types is known is skipped; anything
unreadable stops the whole sync before a leaderboard is touched."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cluster_manager.core.competition import load_competition
from cluster_manager.core.sync_plan import ProblemSpec
from cluster_manager.core.task import load_task
from cluster_manager.errors import ClusterManagerError, InvalidCompetitionError
from cluster_manager.gpus import GpuRegistry
from cluster_manager.service.rules import parse_deadline


@dataclass(frozen=True)
class LoadedProblemSet:
    name: str
    problems: list[tuple[ProblemSpec, list[str]]]  # each with what was left out of it
    skipped: list[str]  # problems left out entirely, each with why


def competition_file(path: Path, problem_set: str | None) -> Path:
    """PATH itself, or with --problem-set NAME the file NAME.yaml in the folder PATH."""
    if problem_set is None:
        return path
    for suffix in (".yaml", ".yml"):
        if (candidate := path / f"{problem_set}{suffix}").is_file():
            return candidate
    raise ClusterManagerError(f"{path} holds no problem set {problem_set!r} ({problem_set}.yaml)")


def load_problem_set(path: Path, registry: GpuRegistry) -> LoadedProblemSet:
    competition = load_competition(path)
    label = path.name
    problems: list[tuple[ProblemSpec, list[str]]] = []
    skipped: list[str] = []
    known = set(registry.names)
    for index, problem in enumerate(competition.problems):
        where = f"problems[{index}] ({problem.name})"
        raw_deadline = problem.deadline or competition.deadline
        if not raw_deadline:
            raise InvalidCompetitionError(label, where, "has no deadline, nor has the file")
        try:
            deadline = parse_deadline(raw_deadline)
        except ClusterManagerError as exc:
            raise InvalidCompetitionError(label, f"{where}.deadline", str(exc)) from None
        if not problem.gpus:
            raise InvalidCompetitionError(label, f"{where}.gpus", "lists no GPU type")
        unknown = [g for g in problem.gpus if g not in known]
        gpus = tuple(g for g in problem.gpus if g in known)
        if not gpus:
            skipped.append(
                f"{problem.name}: none of its GPU types ({', '.join(unknown)}) is configured "
                f"here (known: {', '.join(sorted(known))})"
            )
            continue
        task = load_task(problem.directory)
        notes = [f"GPU type {g} is not configured here: left out" for g in unknown]
        problems.append((ProblemSpec(problem.name, task, deadline, gpus), notes))
    return LoadedProblemSet(competition.name, problems, skipped)
