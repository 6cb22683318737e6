"""Loads a task (`task.yml` plus the files it names) from a folder or a zip into a `Task`.

Task folders from the public problem sets load unchanged, including sources that name sibling
files of the problem set (`../eval.py`). Every problem is reported as an `InvalidTaskError`
naming the file, the key and the reason. Where the bytes come from is `task_sources`.
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.models import (
    SUBMISSION_SOURCE,
    Case,
    CudaConfig,
    Language,
    RankingBy,
    Task,
    TaskFile,
)
from cluster_manager.core.names import hidden_problem
from cluster_manager.core.speed_of_light import SPEED_OF_LIGHT_KEY, parse_spec
from cluster_manager.core.task_sources import (
    CORRUPT_ARCHIVE,
    DEFAULT_LIMITS,
    TASK_YAML,
    FolderSource,
    TaskLimits,
    TaskSource,
    ZipSource,
)
from cluster_manager.core.yaml_files import decode_text, parse_mapping

FLOOR_KEY = "min_time_us"
_TIMEOUT_KEYS = ("test_timeout", "benchmark_timeout", "ranked_timeout")


def load_task(
    path: str | Path, *, limits: TaskLimits = DEFAULT_LIMITS, root: Path | None = None
) -> Task:
    """Loads the task at `path`: a folder holding task.yml, or a .zip of one. A folder's
    sources may come from anywhere under `root` (by default `problem_set_root`)."""
    path = Path(path)
    if path.is_dir():
        return _load(FolderSource(path, limits, root), path.resolve().name, limits)
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise InvalidTaskError(path.name, None, "not a folder and not a zip archive")
        try:
            archive = zipfile.ZipFile(path)
        except CORRUPT_ARCHIVE as exc:
            raise InvalidTaskError(path.name, None, f"not a valid zip archive ({exc})") from None
        with archive:
            return _load(ZipSource(archive, path.name, limits), path.stem, limits)
    # Under a problem set's root, as its competition file names it: never a server's path.
    shown = path.relative_to(root) if root is not None and path.is_relative_to(root) else path
    raise InvalidTaskError(str(shown), None, "no such file or folder")


def load_task_zip_bytes(data: bytes, name: str, *, limits: TaskLimits = DEFAULT_LIMITS) -> Task:
    """Loads a zip held in memory (an upload), named after `name` without its extension."""
    import io

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except CORRUPT_ARCHIVE as exc:
        raise InvalidTaskError(name, None, f"not a valid zip archive ({exc})") from None
    with archive:
        return _load(ZipSource(archive, name, limits), PurePosixPath(name).stem, limits)


# --- task.yml --------------------------------------------------------------------------------


def parse_task_yaml(data: bytes, *, limits: TaskLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    return parse_mapping(data, TASK_YAML, max_bytes=limits.yaml_bytes)


def _load(source: TaskSource, name: str, limits: TaskLimits) -> Task:
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
    tests = _cases(spec.get("tests"), "tests", multi_gpu)
    benchmarks = spec.get("benchmarks")
    cases = _cases(_without_floors(benchmarks), "benchmarks", multi_gpu)

    return Task(
        name=name,
        lang=lang,
        files=files,
        tests=tests,
        benchmarks=cases,
        floors_us=_floors(benchmarks),
        speed_of_light=parse_spec(spec.get(SPEED_OF_LIGHT_KEY), cases, TASK_YAML),
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
        and hidden_problem(name) is None
    )


def _files(raw: object, source: TaskSource) -> tuple[TaskFile, ...]:
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
            files.append(TaskFile(name, decode_text(data, str(src))))
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


def _templates(raw: object, source: TaskSource) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidTaskError(TASK_YAML, "templates", "must map a language name to a file")
    return {
        str(lang): decode_text(source.read(path, key=f"templates.{lang}"), str(path))
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
                    TASK_YAML, where, f"parameter name {param!r} must be letters, digits or '_'"
                )
            if not protocol.is_case_value(value):
                raise InvalidTaskError(
                    TASK_YAML,
                    f"{where}.{param}",
                    f"{value!r} must be an integer, a boolean, a word or a list of those",
                )
        world_size = case.get("world_size")
        if multi_gpu and not (protocol.is_integer(world_size) and world_size > 0):
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
        floors.append(float(value) if valid and value is not None else None)
    return tuple(floors) if any(f is not None for f in floors) else ()


def _timeout(spec: Mapping[str, Any], key: str) -> float:
    value = spec.get(key, 180)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
        raise InvalidTaskError(TASK_YAML, key, f"must be seconds in (0, 3600], got {value!r}")
    return float(value)


# Other names people give a template's language: the task's `lang` (`py`, `cu`), which names
# its templates' language too, and common short forms. Each maps to a template's own name.
TEMPLATE_ALIASES = {
    Language.PYTHON.value: "python",
    "python3": "python",
    Language.CUDA.value: "cuda",
}


def find_template(templates: dict[str, str], language: str) -> str | None:
    """The starter for `language`: a template's name (`Python`), the task's `lang` (`py`,
    `cu`) or a common alias, in any case."""
    wanted = language.strip().lower()
    wanted = TEMPLATE_ALIASES.get(wanted, wanted)
    return next((text for lang, text in templates.items() if lang.lower() == wanted), None)


def template_names(template: str) -> list[str]:
    """What `find_template` takes for the template called `template`: its name, then its
    aliases (`Python`: python, py, python3)."""
    own = template.lower()
    return [own, *(alias for alias, name in TEMPLATE_ALIASES.items() if name == own)]


def no_template(leaderboard: str, language: str, templates: dict[str, str]) -> str:
    """The refusal of a language the board has no template for, with the names it takes."""
    if not templates:
        return f"{leaderboard!r} has no templates"
    known = "; ".join(
        f"{name}, asked for as {_either(template_names(name))}" for name in sorted(templates)
    )
    return f"{leaderboard!r} has no {language!r} template (it has: {known})"


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
