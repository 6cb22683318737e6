"""Fixtures shared by the harness's tests."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
from collections.abc import Iterator

import pytest

from cluster_manager.harness.zygote import Zygote


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    """A zygote forked from this test process, closed after the test."""
    started = Zygote()
    yield started
    started.close()


@pytest.fixture
def pipe() -> Iterator[tuple[multiprocessing.connection.Connection, ...]]:
    """Both ends of a worker's kind of connection, closed after the test."""
    ours, theirs = multiprocessing.Pipe()
    yield ours, theirs
    ours.close()
    theirs.close()
