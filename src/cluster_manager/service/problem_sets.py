"""A problem set's competition file read for syncing: each problem's task loaded, its
deadline read and its GPU types checked against the registry and what this deployment serves.
Unknown GPU types, and types nothing here runs, are left out and reported (never guessed); a
problem none of whose types is known and served is skipped; anything unreadable stops the
whole sync before a leaderboard is touched."""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cluster_manager.core.competition import load_competition
from cluster_manager.core.errors import ClusterManagerError, InvalidCompetitionError
from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.names import hidden_problem
from cluster_manager.core.sync_plan import ProblemSpec
from cluster_manager.core.task import load_task
from cluster_manager.core.task_sources import CORRUPT_ARCHIVE
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


def load_problem_set(
    path: Path, registry: GpuRegistry, unserved: Mapping[str, str] | None = None
) -> LoadedProblemSet:
    """The competition file's problems, each task read from files under the file's own folder
    (its problems' directories must be there too): an uploaded archive whose file names its
    own folder as a task cannot reach the server's files through its sources. `unserved`:
    the GPU types nothing here runs, each with why (`Service.leaderboards.gpus_not_served`)."""
    competition = load_competition(path)
    root = path.resolve().parent
    label = path.name
    problems: list[tuple[ProblemSpec, list[str]]] = []
    skipped: list[str] = []
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
        gpus, notes = _usable_gpus(problem.gpus, registry, unserved or {})
        if not gpus:
            skipped.append(_none_usable(problem.name, problem.gpus, registry, unserved or {}))
            continue
        task = load_task(problem.directory, root=root)
        problems.append((ProblemSpec(problem.name, task, deadline, gpus), notes))
    return LoadedProblemSet(competition.name, problems, skipped)


def _usable_gpus(
    listed: Sequence[str], registry: GpuRegistry, unserved: Mapping[str, str]
) -> tuple[tuple[str, ...], list[str]]:
    """The listed types this deployment knows and serves, and a note for each other one."""
    notes = []
    for gpu in listed:
        if gpu not in registry.types:
            notes.append(f"GPU type {gpu} is not configured here: left out")
        elif gpu in unserved:
            notes.append(f"GPU type {gpu} is not served here ({unserved[gpu]}): left out")
    usable = tuple(g for g in listed if g in registry.types and g not in unserved)
    return usable, notes


def _none_usable(
    name: str, listed: Sequence[str], registry: GpuRegistry, unserved: Mapping[str, str]
) -> str:
    """Why a problem is skipped: none of its GPU types is known, or served."""
    unknown = [g for g in listed if g not in registry.types]
    if len(unknown) == len(listed):
        return (
            f"{name}: none of its GPU types ({', '.join(unknown)}) is configured "
            f"here (known: {', '.join(registry.names)})"
        )
    reasons = [unserved[g] for g in listed if g in unserved]
    reasons += [f"{g} is not configured here" for g in unknown]
    return f"{name}: none of its GPU types is served here ({'; '.join(reasons)})"


MAX_ARCHIVE_ENTRIES = 5000
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024  # uncompressed, all files
MAX_ARCHIVE_FILE_BYTES = 4 * 1024 * 1024


def unpack_problem_sets(data: bytes, dest: Path) -> None:
    """Writes a zip of problem sets (a repository's archive, say) under `dest`: regular files
    only, no absolute or escaping paths, no links, bounded in entries and in bytes actually
    read (a header's sizes can lie)."""
    label = "the uploaded archive"
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except CORRUPT_ARCHIVE as exc:
        raise InvalidCompetitionError(label, None, f"is not a readable zip ({exc})") from None
    if len(infos) > MAX_ARCHIVE_ENTRIES:
        raise InvalidCompetitionError(
            label, None, f"{len(infos)} entries: over {MAX_ARCHIVE_ENTRIES}"
        )
    total = 0
    for info in infos:
        name = info.filename.replace("\\", "/")
        parts = PurePosixPath(name).parts
        if not name or name.startswith("/") or ".." in parts or ":" in (parts[0] if parts else ""):
            raise InvalidCompetitionError(label, info.filename, "escapes the archive")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidCompetitionError(label, info.filename, "links are not allowed")
        if problem := hidden_problem(name):
            raise InvalidCompetitionError(label, ascii(info.filename), problem)
        if info.is_dir():
            continue
        try:
            with archive.open(info) as member:
                content = member.read(MAX_ARCHIVE_FILE_BYTES + 1)
        except (*CORRUPT_ARCHIVE, RuntimeError, zlib.error) as exc:
            raise InvalidCompetitionError(label, info.filename, f"cannot be read ({exc})") from None
        total += len(content)
        if len(content) > MAX_ARCHIVE_FILE_BYTES or total > MAX_ARCHIVE_BYTES:
            raise InvalidCompetitionError(label, info.filename, "over the size limit")
        target = dest.joinpath(*parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            raise InvalidCompetitionError(
                label, info.filename, "is both a file and a folder in the archive"
            ) from None


def find_problem_set(root: Path, problem_set: str) -> Path:
    """The competition file `problem_set` in an unpacked archive: `NAME.yaml` at most three
    folders down (a repository archive's top folder, then `problems/`)."""
    if not problem_set or "/" in problem_set or problem_set.startswith("."):
        raise ClusterManagerError(f"{problem_set!r} is not a problem set's name")
    found = [
        p
        for pattern in ("*", "*/*", "*/*/*", "*/*/*/*")
        for p in root.glob(f"{pattern}.y*ml")
        if p.stem == problem_set and p.suffix in (".yaml", ".yml")
    ]
    if len(found) != 1:
        where = "nowhere" if not found else ", ".join(str(p.relative_to(root)) for p in found)
        raise ClusterManagerError(
            f"the archive should hold one {problem_set}.yaml; found it {where}"
        )
    return found[0]
