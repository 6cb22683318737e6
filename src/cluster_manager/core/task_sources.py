"""Where a task's files come from: a folder or a zip, read with bounded reads.

A folder's sources may name sibling files of the problem set (`../eval.py`) but not leave it; a
zip is read in memory, so nothing is written out and a zip bomb is refused before it costs more
than the caps in `TaskLimits`.
"""

from __future__ import annotations

import lzma
import posixpath
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

import yaml

from cluster_manager.core.errors import InvalidTaskError

TASK_YAML = "task.yml"


@dataclass(frozen=True)
class TaskLimits:
    yaml_bytes: int = 256 * 1024
    file_bytes: int = 4 * 1024 * 1024
    total_bytes: int = 32 * 1024 * 1024
    zip_entries: int = 1000


DEFAULT_LIMITS = TaskLimits()
_DRIVE = re.compile(r"^[A-Za-z]:")
# What opening a damaged or exotic archive can raise from zipfile (a header asking for a zip
# version it lacks, offsets pointing before the start, names flagged UTF-8 that are not).
CORRUPT_ARCHIVE = (
    zipfile.BadZipFile,
    OSError,
    EOFError,
    NotImplementedError,
    ValueError,
)
# ... and what reading one of its members can raise, from zipfile and its decompressors.
_CORRUPT_MEMBER = (*CORRUPT_ARCHIVE, RuntimeError, zlib.error, lzma.LZMAError)


class TaskSource(Protocol):
    label: str

    def read(self, rel: str, *, key: str) -> bytes: ...


def _check_relative(rel: object, *, file: str, key: str) -> str:
    if not isinstance(rel, str) or not rel.strip():
        raise InvalidTaskError(file, key, "must be a non-empty relative path")
    if rel.startswith(("/", "\\")) or _DRIVE.match(rel):
        raise InvalidTaskError(file, key, f"absolute path {rel!r} is not allowed")
    if "\\" in rel or "\x00" in rel:
        raise InvalidTaskError(file, key, f"path {rel!r} may only use '/' as separator")
    return rel


# A competition YAML is small; anything bigger at a folder's top is not one.
_COMPETITION_YAML_BYTES = 256 * 1024


def _is_competition_yaml(path: Path) -> bool:
    """A YAML file listing `problems:` (the public problem sets' `problems/<set>.yaml`)."""
    try:
        if path.name == TASK_YAML or path.stat().st_size > _COMPETITION_YAML_BYTES:
            return False
        data = yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and isinstance(data.get("problems"), list)


def _marks_a_root(folder: Path) -> bool:
    if (folder / ".git").exists():
        return True
    return any(_is_competition_yaml(p) for p in [*folder.glob("*.yaml"), *folder.glob("*.yml")])


def problem_set_root(task_dir: Path) -> Path:
    """Where a task's sources may come from: the nearest folder above the task holding `.git` or
    a competition YAML, else the task folder's grandparent (its problem set's parent)."""
    task_dir = task_dir.resolve()
    for folder in task_dir.parents:
        if _marks_a_root(folder):
            return folder
    return task_dir.parent.parent


class FolderSource:
    """A task folder; sources may name files anywhere under `root` (a sibling problem set's
    `utils.py`), never outside it, symlinks resolved."""

    def __init__(self, task_dir: Path, limits: TaskLimits, root: Path | None = None) -> None:
        self.task_dir = task_dir.resolve()
        self.root = (root or problem_set_root(self.task_dir)).resolve()
        self.label = TASK_YAML
        self.limits = limits

    def read(self, rel: str, *, key: str) -> bytes:
        rel = _check_relative(rel, file=TASK_YAML, key=key)
        target = (self.task_dir / rel).resolve()
        if not target.is_relative_to(self.root):
            # Only the root's own name: the message may reach whoever sent the task.
            raise InvalidTaskError(
                TASK_YAML, key, f"{rel!r} leads outside the root, {self.root.name or ''}/"
            )
        if not target.is_file() and key == TASK_YAML:
            raise InvalidTaskError(
                f"{self.task_dir.name}/", None, f"no {TASK_YAML} here: a task folder holds one"
            )
        if not target.is_file():
            raise InvalidTaskError(TASK_YAML, key, f"file {rel!r} does not exist")
        size = target.stat().st_size
        if size > self.limits.file_bytes:
            raise InvalidTaskError(
                rel, None, f"{size} bytes is over the limit of {self.limits.file_bytes}"
            )
        return target.read_bytes()


class ZipSource:
    """A zip holding task.yml at its root or in its single top-level folder."""

    def __init__(self, archive: zipfile.ZipFile, label: str, limits: TaskLimits) -> None:
        self.archive = archive
        self.label = label
        self.limits = limits
        self.total_read = 0
        infos = archive.infolist()
        if len(infos) > limits.zip_entries:
            raise InvalidTaskError(
                label, None, f"{len(infos)} entries is over the limit of {limits.zip_entries}"
            )
        self.members: dict[str, zipfile.ZipInfo] = {}
        declared = 0
        for info in infos:
            name = info.filename
            if not name:  # zipfile cuts a name at its first NUL byte
                raise InvalidTaskError(label, None, "an entry has an empty name")
            if name.startswith(("/", "\\")) or _DRIVE.match(name):
                raise InvalidTaskError(label, name, "absolute paths are not allowed in a task zip")
            parts = PurePosixPath(name.replace("\\", "/")).parts
            if ".." in parts:
                raise InvalidTaskError(label, name, "entry escapes the archive root ('..')")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise InvalidTaskError(label, name, "symbolic links are not allowed in a task zip")
            declared += info.file_size
            if not info.is_dir():
                self.members[posixpath.normpath(name)] = info
        if declared > limits.total_bytes:
            raise InvalidTaskError(
                label,
                None,
                f"uncompressed size {declared} bytes is over the limit of {limits.total_bytes}",
            )
        candidates = [n for n in self.members if PurePosixPath(n).name == TASK_YAML]
        top = [n for n in candidates if n.count("/") <= 1]
        if TASK_YAML in top:
            self.task_dir = ""
        elif len(top) == 1:
            self.task_dir = posixpath.dirname(top[0])
        elif not top:
            raise InvalidTaskError(label, None, f"no {TASK_YAML} at the root or in one folder")
        else:
            raise InvalidTaskError(label, None, f"several {TASK_YAML} files: {sorted(top)}")

    def read(self, rel: str, *, key: str) -> bytes:
        rel = _check_relative(rel, file=TASK_YAML, key=key)
        name = posixpath.normpath(posixpath.join(self.task_dir, rel))
        if name == ".." or name.startswith("../"):
            raise InvalidTaskError(TASK_YAML, key, f"{rel!r} leaves the archive")
        info = self.members.get(name)
        if info is None:
            raise InvalidTaskError(TASK_YAML, key, f"file {rel!r} is not in {self.label}")
        budget = min(self.limits.file_bytes, self.limits.total_bytes - self.total_read)
        # Bounded read: the size in the header can lie, the bytes we accept cannot.
        try:
            with self.archive.open(info) as member:
                data = member.read(budget + 1)
        except _CORRUPT_MEMBER as exc:
            raise InvalidTaskError(self.label, name, f"cannot be read ({exc})") from None
        if len(data) > budget:
            raise InvalidTaskError(
                self.label, name, "uncompresses to more than the size limit (zip bomb?)"
            )
        self.total_read += len(data)
        return data
