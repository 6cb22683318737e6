"""A task written back as a folder that `load_task` reads: its files, its templates and a
task.yml naming them (`leaderboard task NAME --out DIR`, then `eval DIR FILE`)."""

from __future__ import annotations

from typing import Any

import yaml

from cluster_manager.core.models import SUBMISSION_SOURCE, Case, Task
from cluster_manager.core.speed_of_light import SPEED_OF_LIGHT_KEY, SpeedOfLight
from cluster_manager.core.task import FLOOR_KEY
from cluster_manager.core.task_sources import TASK_YAML

# The file a template is written to, by its language's name (as tasks name them).
TEMPLATE_SUFFIXES = {"python": ".py", "py": ".py", "cuda": ".cu", "cu": ".cu", "hip": ".cpp"}


def folder_files(task: Task) -> dict[str, str]:
    """Every file of the folder, by name: the task's readable files, one per template, and
    task.yml."""
    files = {f.name: f.content for f in task.files if f.content is not None}
    templates: dict[str, str] = {}
    for language, text in task.templates.items():
        name = _template_name(language, taken={*files, *templates.values(), TASK_YAML})
        files[name] = text
        templates[language] = name
    files[TASK_YAML] = yaml.safe_dump(
        _spec(task, templates), sort_keys=False, allow_unicode=True, width=100
    )
    return files


def _template_name(language: str, taken: set[str]) -> str:
    suffix = TEMPLATE_SUFFIXES.get(language.lower(), ".txt")
    stem = "template"
    name, n = f"{stem}{suffix}", 1
    while name in taken:
        n += 1
        name = f"{stem}_{n}{suffix}"
    return name


def _spec(task: Task, templates: dict[str, str]) -> dict[str, Any]:
    speed = task.speed_of_light
    return {
        "files": [
            {"name": f.name, "source": SUBMISSION_SOURCE if f.content is None else f.name}
            for f in task.files
        ],
        "lang": task.lang.value,
        "description": task.description,
        "config": _config(task),
        "templates": templates,
        "tests": [dict(case) for case in task.tests],
        "benchmarks": [_benchmark(case, i, task) for i, case in enumerate(task.benchmarks)],
        "test_timeout": task.test_timeout,
        "benchmark_timeout": task.benchmark_timeout,
        "ranked_timeout": task.ranked_timeout,
        "ranking_by": task.ranking_by.value,
        "multi_gpu": task.multi_gpu,
        **({} if speed is None else {SPEED_OF_LIGHT_KEY: _speed_of_light(speed)}),
    }


def _speed_of_light(speed: SpeedOfLight) -> dict[str, str]:
    return {k: v for k, v in vars(speed).items() if v is not None}


def _config(task: Task) -> dict[str, Any]:
    if task.cuda is None:
        return {} if task.main is None else {"main": task.main}
    return {
        "sources": list(task.cuda.sources),
        "include_dirs": list(task.cuda.include_dirs),
        "defines": dict(task.cuda.defines),
        "compile_flags": list(task.cuda.compile_flags),
    }


def _benchmark(case: Case, index: int, task: Task) -> dict[str, Any]:
    floor = task.floors_us[index] if index < len(task.floors_us) else None
    return {**case, FLOOR_KEY: floor} if floor is not None else dict(case)


def folder_zip(files: dict[str, str]) -> bytes:
    """A task folder's files (`folder_files`) as a zip that `load_task_zip_bytes` reads: how a
    task crosses the HTTP API, either way."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in sorted(files.items()):
            archive.writestr(name, content)
    return buffer.getvalue()
