"""A competition file: a problem set's YAML listing its problems (`problems/<set>.yaml` in the
public problem sets), each a task folder with the leaderboard's name, deadline and GPU types.

    name: PMPP Practice Problems
    deadline: ""
    problems:
      - directory: pmpp_v2/grayscale_py   # relative to the file's folder
        name: grayscale_v2
        deadline: "2100-12-31"
        gpus: [B200, H100]

Keys this project does not use are allowed (files are shared with other tools); the ones it
reads are checked, each error naming the problem's index and key.
"""

from __future__ import annotations

import datetime
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cluster_manager.core.errors import InvalidCompetitionError
from cluster_manager.core.yaml_files import parse_mapping

MAX_COMPETITION_BYTES = 256 * 1024
COMPETITION_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Problem:
    directory: Path  # resolved, under the competition file's folder
    name: str
    deadline: str  # as written ("" for none); `parse_deadline` reads it where it matters
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Competition:
    file: Path
    name: str
    description: str
    deadline: str
    problems: tuple[Problem, ...]


def is_competition_file(path: Path) -> bool:
    """A YAML file that is not a task's own task.yml: what `leaderboard check` reads as a
    competition file."""
    return path.is_file() and path.suffix in COMPETITION_SUFFIXES and path.name != "task.yml"


def load_competition(path: Path) -> Competition:
    label = path.name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidCompetitionError(label, None, f"cannot be read ({exc.strerror})") from None
    spec = parse_mapping(
        data, label, max_bytes=MAX_COMPETITION_BYTES, error=InvalidCompetitionError
    )
    raw = spec.get("problems")
    if not isinstance(raw, list) or not raw:
        raise InvalidCompetitionError(label, "problems", "must be a non-empty list")
    base = path.resolve().parent
    problems = [_problem(entry, f"problems[{i}]", label, base) for i, entry in enumerate(raw)]
    names = [p.name for p in problems]
    if dupe := next((n for n in names if names.count(n) > 1), None):
        raise InvalidCompetitionError(label, "problems", f"the name {dupe!r} appears twice")
    return Competition(
        file=path,
        name=_text(spec, "name", label, default=path.stem),
        description=_text(spec, "description", label),
        deadline=_text(spec, "deadline", label),
        problems=tuple(problems),
    )


def _problem(entry: object, key: str, label: str, base: Path) -> Problem:
    if not isinstance(entry, dict):
        raise InvalidCompetitionError(label, key, "must be a mapping with at least 'directory'")
    directory = entry.get("directory")
    if not isinstance(directory, str) or not directory.strip():
        raise InvalidCompetitionError(label, f"{key}.directory", "must be a relative path")
    rel = posixpath.normpath(directory)
    if PurePosixPath(rel).is_absolute() or rel.split("/")[0] == ".." or "\\" in rel:
        raise InvalidCompetitionError(
            label, f"{key}.directory", f"{directory!r} must stay inside the file's folder"
        )
    resolved = (base / rel).resolve()
    if not resolved.is_relative_to(base):
        raise InvalidCompetitionError(
            label, f"{key}.directory", f"{directory!r} leads outside the file's folder"
        )
    gpus = entry.get("gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(g, str) and g for g in gpus):
        raise InvalidCompetitionError(label, f"{key}.gpus", "must be a list of GPU type names")
    return Problem(
        directory=resolved,
        name=_text(entry, "name", label, default=PurePosixPath(rel).name, key=key),
        deadline=_text(entry, "deadline", label, key=key),
        gpus=tuple(gpus),
    )


def _text(spec: dict[str, Any], field: str, label: str, default: str = "", key: str = "") -> str:
    value = spec.get(field)
    if value is None or value == "":
        return default
    if isinstance(value, datetime.date):  # YAML reads an unquoted 2100-12-31 as a date
        return value.isoformat()
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    raise InvalidCompetitionError(label, f"{key}.{field}" if key else field, "must be text")
