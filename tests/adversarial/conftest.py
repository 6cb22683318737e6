"""Fixtures for the anti-cheat suite: small tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_manager.core.models import Task
from cluster_manager.core.task import load_task
from tests.adversarial.helpers import NEGATE_REFERENCE, small_task
from tests.conftest import EXAMPLES


@pytest.fixture
def identity(tmp_path: Path) -> Task:
    """An identity task with quick ranked runs."""
    return small_task(tmp_path / "identity")


@pytest.fixture
def timed_identity(tmp_path: Path) -> Task:
    """The identity task with a ranked phase long enough for a few hundred pairs of a kernel
    of milliseconds: the clock's median then moves by well under a tenth even on a
    loaded machine (with 4 s, a few dozen pairs at a load of 10 missed it by 1 %)."""
    return small_task(tmp_path / "identity", ranked_timeout=10)


@pytest.fixture
def slow_identity(tmp_path: Path) -> Task:
    """The identity task with ranked time for ten pairs of a 50 ms kernel and the stand-in's
    replays even on a loaded machine (with fewer, one preempted call moves the clock's median)."""
    return small_task(tmp_path / "identity", ranked_timeout=15)


@pytest.fixture
def negate(tmp_path: Path) -> Task:
    """A task whose output must differ from its input."""
    return small_task(tmp_path / "negate", reference=NEGATE_REFERENCE)


@pytest.fixture(params=["small", "identity_py"])
def any_identity(request: pytest.FixtureRequest, tmp_path: Path) -> Task:
    """The small identity task and the example one: the attack must fail on both."""
    if request.param == "small":
        return small_task(tmp_path / "identity")
    return load_task(EXAMPLES / "identity_py")
