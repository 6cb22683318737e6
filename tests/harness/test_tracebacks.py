"""What a submission's author reads of its exception: their frames, never the platform's."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

from cluster_manager.core.verdicts import headline
from cluster_manager.harness.tensors import map_tensors
from cluster_manager.harness.tracebacks import user_traceback


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch):
    (tmp_path / "user_code.py").write_text(
        "def explode(t):\n"
        "    try:\n"
        "        {}['missing']\n"
        "    except KeyError as exc:\n"
        "        raise ValueError('bad tensor') from exc\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("user_code")
    sys.modules.pop("user_code", None)


def test_the_platforms_frames_are_left_out_and_paths_are_as_imported(user_module, tmp_path):
    try:
        map_tensors(torch.ones(1), user_module.explode)  # the platform calls the user's code
    except ValueError as exc:
        text = user_traceback(exc)
    assert 'File "user_code.py", line 5, in explode' in text
    assert 'File "user_code.py", line 3, in explode' in text  # the cause, stripped alike
    assert "KeyError: 'missing'" in text and text.rstrip().endswith("ValueError: bad tensor")
    assert "cluster_manager" not in text and "tensors.py" not in text
    assert str(tmp_path) not in text


def test_a_librarys_frames_are_named_from_its_package():
    try:
        torch.testing.assert_close(torch.ones(1), torch.zeros(1))
    except AssertionError as exc:
        text = user_traceback(exc)
    assert 'File "torch/testing/_comparison.py"' in text, text
    assert "site-packages" not in text and str(Path.home()) not in text


def test_the_headline_is_a_checks_first_line_or_where_an_exception_was_raised():
    check = (
        "43 of 127 elements differ (rtol=0, atol=0)\n  at [0]: got 1, expected 0\n  ... and 38 more"
    )
    assert headline(check) == "43 of 127 elements differ (rtol=0, atol=0)"
    crash = (
        "Traceback (most recent call last):\n"
        '  File "submission.py", line 7, in custom_kernel\n    return helper(data)\n'
        '  File "submission.py", line 4, in helper\n    raise RuntimeError("no")\n'
        "RuntimeError: no\n"
    )
    assert headline(crash) == "RuntimeError: no (submission.py, line 4)"
    assert headline("") == ""
