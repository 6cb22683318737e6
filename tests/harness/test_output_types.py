"""Outputs of torch's result types and of the task's own NamedTuples and dataclasses reach the
task's check as those types; a type from anywhere else is refused by name."""

from __future__ import annotations

import collections
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.task import load_task
from cluster_manager.harness import output_types
from cluster_manager.harness.tensors import not_plain
from tests.conftest import run_code, write_task

# The task's own types live in task.py, which the reference imports (as public tasks do).
TASK_TYPES = """
import dataclasses
from typing import NamedTuple

import torch

class Pair(NamedTuple):
    left: torch.Tensor
    right: torch.Tensor

@dataclasses.dataclass
class Factors:
    q: torch.Tensor
    r: torch.Tensor
    note: str = "qr"
"""

# generate_input and the check; the check fails unless each output has its exact type.
REFERENCE = """
import torch
from task import Factors, Pair

def generate_input(size, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(size, size, generator=gen)

def ref_kernel(data):
    q, r = torch.linalg.qr(data)
    return (torch.linalg.qr(data), Pair(q, r), Factors(q, r))

def check_implementation(data, output):
    structseq, pair, factors = output
    if type(structseq) is not type(torch.linalg.qr(data)):
        return f"not a torch.return_types value: {type(structseq)}"
    if type(pair) is not Pair or type(factors) is not Factors or factors.note != "qr":
        return f"not the task's types: {type(pair)}, {type(factors)}"
    q, r = ref_kernel(data)[0]
    good = torch.allclose(structseq.Q, q) and torch.allclose(pair.right, r)
    return "" if good and torch.allclose(factors.q, q) else "mismatch"
"""

CORRECT = """
import torch
from task import Factors, Pair

def custom_kernel(data):
    q, r = torch.linalg.qr(data)
    return (torch.linalg.qr(data), Pair(q, r), Factors(q, r))
"""

FOREIGN = """
import collections
import sys
import torch

Point = collections.namedtuple("Point", "q r")

def custom_kernel(data):
    q, r = torch.linalg.qr(data)
    return Point(q, r)
"""


def _task(tmp_path: Path):
    folder = write_task(
        tmp_path / "qr",
        reference=REFERENCE,
        tests=[{"size": 4, "seed": 1}],
        benchmarks=[{"size": 8, "seed": 2}],
        extra={
            "files": [
                {"name": "submission.py", "source": "@SUBMISSION@"},
                {"name": "reference.py", "source": "reference.py"},
                {"name": "task.py", "source": "task.py"},
            ]
        },
    )
    (folder / "task.py").write_text(textwrap.dedent(TASK_TYPES))
    return load_task(folder)


def test_torch_and_task_types_reach_the_check_as_themselves(tmp_path: Path):
    task = _task(tmp_path)
    for mode in (Mode.TEST, Mode.LEADERBOARD):
        result = run_code(task, CORRECT, mode, seed=7 if mode is Mode.LEADERBOARD else None)
        assert result.passed, result.message


def test_a_type_of_the_submissions_own_is_refused_by_name(tmp_path: Path, record_property):
    result = run_code(_task(tmp_path), FOREIGN, Mode.TEST)
    record_property("observed", result.message)
    assert result.verdict is Verdict.WRONG_ANSWER
    assert "submission:Point" in result.message
    assert "not one of torch's or the task's own" in result.message


def test_encode_keeps_plain_containers_and_tags_the_rest():
    qr = torch.linalg.qr(torch.eye(2))
    encoded = output_types.encode({"a": [1, (2, 3)], "qr": qr})
    assert encoded["a"] == [1, (2, 3)]
    assert encoded["qr"][output_types.TYPE_KEY] == "torch.return_types:linalg_qr"
    rebuilt = output_types.rebuild(encoded)
    assert type(rebuilt["qr"]) is type(qr) and torch.equal(rebuilt["qr"].R, qr.R)


def test_list_and_dict_subclasses_stay_unread_for_not_plain_to_refuse():
    class Lazy(list):
        pass

    encoded = output_types.encode({"x": Lazy([1])})
    assert type(encoded["x"]) is Lazy
    assert "not plain" in (not_plain(encoded) or "") or "must be plain" in (
        not_plain(encoded) or ""
    )


def test_rebuild_refuses_types_from_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # the run directory: this test's module is not in it
    Point = collections.namedtuple("Point", "x y")  # a stand-in foreign type
    encoded = output_types.encode(Point(1, 2))
    assert encoded[output_types.TYPE_KEY].startswith("tests.harness.test_output_types:")
    with pytest.raises(ValueError, match="not one of torch's or the task's own"):
        output_types.rebuild(encoded)
    for name in ("os:system", "submission:anything", "builtins:dict"):
        with pytest.raises(ValueError, match=name):
            output_types.rebuild({output_types.TYPE_KEY: name, "items": []})


def test_rebuild_takes_only_classes_a_task_module_defines_and_fits_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A module of the run directory that imports other classes, as references do.
    (tmp_path / "taskmod.py").write_text(
        "import subprocess\nimport torch\nfrom typing import NamedTuple\n"
        "class Pair(NamedTuple):\n    a: int\n    b: int\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.import_module("taskmod")
    try:
        tag = output_types.TYPE_KEY
        for name in ("taskmod:subprocess.Popen", "taskmod:torch.Size"):
            with pytest.raises(ValueError, match="not a class of its module"):
                output_types.rebuild({tag: name, "items": ["true"]})
        pair = output_types.rebuild({tag: "taskmod:Pair", "items": [1, 2]})
        assert type(pair).__name__ == "Pair" and pair == (1, 2)
        with pytest.raises(ValueError, match="taskmod:Pair cannot be built"):
            output_types.rebuild({tag: "taskmod:Pair", "items": [1, 2, 3]})
    finally:
        sys.modules.pop("taskmod", None)
