"""Loads a task (`task.yml` plus the files it names) from a folder or a zip into a `Task`.

Task folders from the public problem sets load unchanged, including sources that name sibling
files of the problem set (`../eval.py`). Every problem is reported as an `InvalidTaskError`
naming the file, the key and the reason. Zips are read in memory with bounded reads: nothing is
written out, so a zip bomb is refused before it costs more than the caps below.
"""

from __future__ import annotations

import lzma
import posixpath
import re
import stat
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import yaml

from cluster_manager.core import protocol
from cluster_manager.core.models import (
    SUBMISSION_SOURCE,
    Case,
    CudaConfig,
    Language,
    RankingBy,
    Task,
    TaskFile,
)
from cluster_manager.errors import InvalidTaskError

TASK_YAML = "task.yml"


@dataclass(frozen=True)
class TaskLimits:
    yaml_bytes: int = 256 * 1024
    file_bytes: int = 4 * 1024 * 1024
    total_bytes: int = 32 * 1024 * 1024
    zip_entries: int = 1000


DEFAULT_LIMITS = TaskLimits()
FLOOR_KEY = "min_time_us"
_TIMEOUT_KEYS = ("test_timeout", "benchmark_timeout", "ranked_timeout")
_DRIVE = re.compile(r"^[A-Za-z]:")
# What opening a damaged or exotic archive can raise from zipfile (a header asking for a zip
# version it lacks, offsets pointing before the start, names flagged UTF-8 that are not).
_CORRUPT_ARCHIVE = (
    zipfile.BadZipFile,
    OSError,
    EOFError,
    NotImplementedError,
    ValueError,
)
# ... and what reading one of its members can raise, from zipfile and its decompressors.
_CORRUPT_MEMBER = (*_CORRUPT_ARCHIVE, RuntimeError, zlib.error, lzma.LZMAError)


class _Source(Protocol):
    label: str

    def read(self, rel: str, *, key: str) -> bytes: ...


def load_task(path: str | Path, *, limits: TaskLimits = DEFAULT_LIMITS) -> Task:
    """Loads the task at `path`: a folder holding task.yml, or a .zip of one."""
    path = Path(path)
    if path.is_dir():
        return _load(_FolderSource(path, limits), path.resolve().name, limits)
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise InvalidTaskError(path.name, None, "not a folder and not a zip archive")
        try:
            archive = zipfile.ZipFile(path)
        except _CORRUPT_ARCHIVE as exc:
            raise InvalidTaskError(path.name, None, f"not a valid zip archive ({exc})") from None
        with archive:
            return _load(_ZipSource(archive, path.name, limits), path.stem, limits)
    raise InvalidTaskError(str(path), None, "no such file or folder")


def load_task_zip_bytes(data: bytes, name: str, *, limits: TaskLimits = DEFAULT_LIMITS) -> Task:
    """Loads a zip held in memory (an upload), named after `name` without its extension."""
    import io

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except _CORRUPT_ARCHIVE as exc:
        raise InvalidTaskError(name, None, f"not a valid zip archive ({exc})") from None
    with archive:
        return _load(_ZipSource(archive, name, limits), PurePosixPath(name).stem, limits)


# --- sources ---------------------------------------------------------------------------------


def _check_relative(rel: object, *, file: str, key: str) -> str:
    if not isinstance(rel, str) or not rel.strip():
        raise InvalidTaskError(file, key, "must be a non-empty relative path")
    if rel.startswith(("/", "\\")) or _DRIVE.match(rel):
        raise InvalidTaskError(file, key, f"absolute path {rel!r} is not allowed")
    if "\\" in rel or "\x00" in rel:
        raise InvalidTaskError(file, key, f"path {rel!r} may only use '/' as separator")
    return rel


class _FolderSource:
    """A task folder; sources may reach sibling files but not leave the problem set's root."""

    def __init__(self, task_dir: Path, limits: TaskLimits) -> None:
        self.task_dir = task_dir.resolve()
        self.root = self.task_dir.parent
        self.label = TASK_YAML
        self.limits = limits

    def read(self, rel: str, *, key: str) -> bytes:
        rel = _check_relative(rel, file=TASK_YAML, key=key)
        target = (self.task_dir / rel).resolve()
        if not target.is_relative_to(self.root):
            raise InvalidTaskError(TASK_YAML, key, f"{rel!r} leaves the problem set's folder")
        if not target.is_file():
            raise InvalidTaskError(TASK_YAML, key, f"file {rel!r} does not exist")
        size = target.stat().st_size
        if size > self.limits.file_bytes:
            raise InvalidTaskError(
                rel, None, f"{size} bytes is over the limit of {self.limits.file_bytes}"
            )
        return target.read_bytes()


class _ZipSource:
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


# --- task.yml --------------------------------------------------------------------------------


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors/aliases: they are how YAML bombs multiply."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases are not allowed in task.yml", event.start_mark
            )
        return super().compose_node(parent, index)


def parse_task_yaml(data: bytes, *, limits: TaskLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    if len(data) > limits.yaml_bytes:
        raise InvalidTaskError(
            TASK_YAML, None, f"{len(data)} bytes is over the limit of {limits.yaml_bytes}"
        )
    text = _decode(data, TASK_YAML)
    try:
        spec = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise InvalidTaskError(TASK_YAML, None, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise InvalidTaskError(TASK_YAML, None, "nested too deeply") from None
    if not isinstance(spec, dict):
        raise InvalidTaskError(TASK_YAML, None, "must be a mapping of keys to values")
    return spec


def _decode(data: bytes, file: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidTaskError(file, None, f"not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:  # never in source code, and Postgres text cannot hold it
        raise InvalidTaskError(file, None, f"not text: a NUL byte at byte {data.index(0)}")
    return text


def _load(source: _Source, name: str, limits: TaskLimits) -> Task:
    spec = parse_task_yaml(source.read(TASK_YAML, key=TASK_YAML), limits=limits)

    lang_raw = spec.get("lang")
    if not isinstance(lang_raw, str) or lang_raw not in {lang.value for lang in Language}:
        raise InvalidTaskError(TASK_YAML, "lang", f"must be 'py' or 'cu', got {lang_raw!r}")
    lang = Language(lang_raw)

    files = _files(spec.get("files"), source)
    names = {f.name for f in files}
    config = spec.get("config") or {}
    if not isinstance(config, dict):
        raise InvalidTaskError(TASK_YAML, "config", "must be a mapping")
    main, cuda = _config(config, lang, names)

    multi_gpu = spec.get("multi_gpu", False)
    if not isinstance(multi_gpu, bool):
        raise InvalidTaskError(TASK_YAML, "multi_gpu", "must be true or false")

    ranking_raw = spec.get("ranking_by", RankingBy.LAST.value)
    if not isinstance(ranking_raw, str) or ranking_raw not in {r.value for r in RankingBy}:
        raise InvalidTaskError(
            TASK_YAML, "ranking_by", f"must be 'last', 'mean' or 'geom', got {ranking_raw!r}"
        )

    description = spec.get("description", "")
    if not isinstance(description, str):
        raise InvalidTaskError(TASK_YAML, "description", "must be text")
    benchmarks = spec.get("benchmarks")

    return Task(
        name=name,
        lang=lang,
        files=files,
        tests=_cases(spec.get("tests"), "tests", multi_gpu),
        benchmarks=_cases(_without_floors(benchmarks), "benchmarks", multi_gpu),
        floors_us=_floors(benchmarks),
        main=main,
        cuda=cuda,
        templates=_templates(spec.get("templates"), source),
        ranking_by=RankingBy(ranking_raw),
        multi_gpu=multi_gpu,
        description=description,
        **{key: _timeout(spec, key) for key in _TIMEOUT_KEYS},
    )


def _is_safe_name(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return (
        bool(parts)
        and not name.startswith("/")
        and ".." not in parts
        and "\\" not in name
        and "\x00" not in name
    )


def _files(raw: object, source: _Source) -> tuple[TaskFile, ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidTaskError(TASK_YAML, "files", "must be a non-empty list of {name, source}")
    files: list[TaskFile] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        key = f"files[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "source"}:
            raise InvalidTaskError(TASK_YAML, key, "must be a mapping with 'name' and 'source'")
        name, src = entry["name"], entry["source"]
        if not isinstance(name, str) or not _is_safe_name(name):
            raise InvalidTaskError(TASK_YAML, f"{key}.name", f"{name!r} is not a safe file name")
        # `./a.py` and `a.py` are one file in the run directory: compare normalised names.
        name = posixpath.normpath(name)
        if name in seen:
            raise InvalidTaskError(TASK_YAML, f"{key}.name", f"{name!r} appears twice")
        seen.add(name)
        if src == SUBMISSION_SOURCE:
            files.append(TaskFile(name, None))
        else:
            data = source.read(src, key=f"{key}.source")
            files.append(TaskFile(name, _decode(data, str(src))))
    slots = [f.name for f in files if f.is_submission]
    if len(slots) != 1:
        raise InvalidTaskError(
            TASK_YAML, "files", f"exactly one file must have source {SUBMISSION_SOURCE}"
        )
    return tuple(files)


def _str_list(raw: object, key: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise InvalidTaskError(TASK_YAML, key, "must be a list of strings")
    return tuple(raw)


def _config(
    config: Mapping[str, Any], lang: Language, names: set[str]
) -> tuple[str | None, CudaConfig | None]:
    if lang is Language.PYTHON:
        main = config.get("main")
        if main is not None and (not isinstance(main, str) or main not in names):
            raise InvalidTaskError(
                TASK_YAML, "config.main", f"{main!r} is not one of the task's files"
            )
        return main, None
    sources = _str_list(config.get("sources"), "config.sources")
    if not sources:
        raise InvalidTaskError(TASK_YAML, "config.sources", "a CUDA task must list its sources")
    for src in sources:
        if src not in names:
            raise InvalidTaskError(
                TASK_YAML, "config.sources", f"{src!r} is not one of the task's files"
            )
    defines = config.get("defines") or {}
    if not isinstance(defines, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int) and not isinstance(v, bool)
        for k, v in defines.items()
    ):
        raise InvalidTaskError(TASK_YAML, "config.defines", "must map names to strings or ints")
    include_dirs = _str_list(config.get("include_dirs"), "config.include_dirs")
    for inc in include_dirs:
        if not _is_safe_name(inc):
            raise InvalidTaskError(TASK_YAML, "config.include_dirs", f"{inc!r} is not relative")
    return None, CudaConfig(
        sources=sources,
        include_dirs=include_dirs,
        defines={k: str(v) for k, v in defines.items()},
        compile_flags=_str_list(config.get("compile_flags"), "config.compile_flags"),
    )


def _templates(raw: object, source: _Source) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidTaskError(TASK_YAML, "templates", "must map a language name to a file")
    return {
        str(lang): _decode(source.read(path, key=f"templates.{lang}"), str(path))
        for lang, path in raw.items()
    }


def _cases(raw: object, key: str, multi_gpu: bool) -> tuple[Case, ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidTaskError(TASK_YAML, key, "must be a non-empty list of cases")
    cases = []
    for i, case in enumerate(raw):
        where = f"{key}[{i}]"
        if not isinstance(case, dict) or not case:
            raise InvalidTaskError(TASK_YAML, where, "must be a mapping of parameters")
        for param, value in case.items():
            if not isinstance(param, str) or not protocol.CASE_KEY.fullmatch(param):
                raise InvalidTaskError(
                    TASK_YAML, where, f"parameter name {param!r} must be letters or '_'"
                )
            if not protocol.is_case_value(value):
                raise InvalidTaskError(
                    TASK_YAML, f"{where}.{param}", f"{value!r} must be an integer or a word"
                )
        if multi_gpu and not (isinstance(case.get("world_size"), int) and case["world_size"] > 0):
            raise InvalidTaskError(
                TASK_YAML, f"{where}.world_size", "a multi_gpu task needs a positive world_size"
            )
        cases.append(dict(case))
    return tuple(cases)


def _without_floors(raw: object) -> object:
    """Benchmark cases as the harness gets them: `min_time_us` is ours, not a parameter."""
    if not isinstance(raw, list):
        return raw
    return [
        {k: v for k, v in case.items() if k != FLOOR_KEY} if isinstance(case, dict) else case
        for case in raw
    ]


def _floors(raw: object) -> tuple[float | None, ...]:
    """Each benchmark's `min_time_us`, or None; () when no benchmark states one."""
    if not isinstance(raw, list):
        return ()
    floors: list[float | None] = []
    for i, case in enumerate(raw):
        value = case.get(FLOOR_KEY) if isinstance(case, dict) else None
        valid = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        if value is not None and not valid:
            where = f"benchmarks[{i}].{FLOOR_KEY}"
            raise InvalidTaskError(
                TASK_YAML, where, f"must be positive microseconds, got {value!r}"
            )
        floors.append(float(value) if valid else None)
    return tuple(floors) if any(f is not None for f in floors) else ()


def _timeout(spec: Mapping[str, Any], key: str) -> float:
    value = spec.get(key, 180)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise InvalidTaskError(TASK_YAML, key, f"must be seconds in (0, 3600], got {value!r}")
    return float(value)
