"""A task written back as a folder loads as the same task: what `leaderboard task --out`
hands a competitor runs as the leaderboard's own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cluster_manager.core.task import load_task
from cluster_manager.core.task_folder import folder_files
from tests.conftest import EXAMPLES, write_task

SHIPPED = ["identity_py", "vectoradd_py", "vectoradd_cu", "softmax_py", "allreduce_py"]


def _written(files: dict[str, str], folder: Path) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("example", SHIPPED)
def test_every_shipped_example_loads_back_as_itself(example, tmp_path):
    task = load_task(EXAMPLES / example)
    again = load_task(_written(folder_files(task), tmp_path / example))
    assert again == task


def test_floors_a_main_and_clashing_template_names_survive(tmp_path):
    spec = {
        "benchmarks": [{"size": 64, "seed": 3, "min_time_us": 1.5}, {"size": 8, "seed": 4}],
        "config": {"main": "reference.py"},
        "templates": {
            "Python": "reference.py",
            "py": "reference.py",
            "Mojo": "reference.py",
        },
        "ranking_by": "geom",
        "multi_gpu": False,
    }
    task = load_task(write_task(tmp_path / "src", extra=spec))
    files = folder_files(task)
    assert {"template.py", "template_2.py", "template.txt"} <= set(files)
    again = load_task(_written(files, tmp_path / "src2"))
    assert dataclasses.replace(again, name=task.name) == task
    assert again.floors_us == (1.5, None) and again.main == "reference.py"
