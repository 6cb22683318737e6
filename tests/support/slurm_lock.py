"""Tests that use the one-node Slurm cluster share it; a test that takes the node down needs it
to itself, or it kills the jobs of the tests running beside it.

The Slurm tests run on both test processes at once (`--dist load`: the heavy tests are spread
over both, tests/support/scheduling.py), and another pytest session may use the cluster as well. So
every Slurm test holds a lock file, shared, and the node-down test holds it exclusively.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

LOCK_FILE = Path(tempfile.gettempdir()) / "cm-slurm-tests.lock"


@contextlib.contextmanager
def _holding(exclusive: bool) -> Iterator[None]:
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # and with it the lock


@pytest.fixture
def slurm_shared(slurm_cluster: None) -> Iterator[None]:
    """The cluster, alongside other tests."""
    with _holding(exclusive=False):
        yield


@pytest.fixture
def slurm_alone(slurm_cluster: None) -> Iterator[None]:
    """The cluster with no other test's job on it (waits for those running to end)."""
    with _holding(exclusive=True):
        yield
