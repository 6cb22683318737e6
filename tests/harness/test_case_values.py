"""Cases as the public problem sets write them (booleans, lists, underscored words) reach the
task's `generate_input` as the same Python values, through the real runner."""

from __future__ import annotations

import copy
from pathlib import Path

from cluster_manager.core.models import Mode
from cluster_manager.core.task import load_task
from tests.conftest import CORRECT, run_code, write_task

# generate_input fails the case unless every value arrived with its exact type and value.
TYPED_REFERENCE = """
import torch

def generate_input(size, seed, has_bias, m, case, nomask=False):
    assert type(size) is int and type(seed) is int, (size, seed)
    assert has_bias is True and nomask is False, (has_bias, nomask)
    assert type(m) is list and m == [96, 128], m
    assert case == "lapack_zero", case
    return torch.full((size,), float(sum(m)))

def ref_kernel(data):
    return data.clone()

def check_implementation(data, output):
    return "" if torch.equal(data, output) else "mismatch"
"""

CASES = [
    {"size": 8, "seed": 1, "has_bias": True, "m": [96, 128], "case": "lapack_zero"},
    {
        "size": 4,
        "seed": 2,
        "has_bias": True,
        "m": [96, 128],
        "case": "lapack_zero",
        "nomask": False,
    },
]


def test_booleans_lists_and_underscored_words_reach_the_task_unchanged(tmp_path: Path):
    task = load_task(
        write_task(
            tmp_path / "t",
            reference=TYPED_REFERENCE,
            tests=CASES,
            benchmarks=copy.deepcopy(CASES[:1]),
        )
    )
    assert task.tests[0]["m"] == [96, 128] and task.tests[0]["has_bias"] is True
    for mode in (Mode.TEST, Mode.LEADERBOARD):
        result = run_code(task, CORRECT, mode, seed=99 if mode is Mode.LEADERBOARD else None)
        assert result.passed, result.message
        specs = [t.spec for t in result.tests]
        assert specs[0] == "size: 8; seed: 1; has_bias: True; m: [96, 128]; case: lapack_zero"
