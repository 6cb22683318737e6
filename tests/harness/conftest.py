"""Fixtures shared by the harness's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cluster_manager.harness.zygote import Zygote


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    """A zygote forked from this test process, closed after the test."""
    started = Zygote()
    yield started
    started.close()
