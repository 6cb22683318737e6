"""The cgroup probe runs once per process, whoever asks first: a caller that comes while the
background probe runs waits for its answer instead of probing again."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from cluster_manager.sandbox import cgroups


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    cgroups._probe.cache_clear()
    yield
    cgroups._probe.cache_clear()  # the next caller probes this machine for real


def test_a_caller_during_the_background_probe_waits_for_it(
    fresh_probe: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0
    started, release = threading.Event(), threading.Event()

    def slow_probe() -> str:
        nonlocal calls
        calls += 1
        started.set()
        assert release.wait(10)
        return "probed once"

    monkeypatch.setattr(cgroups, "_probe", cgroups.functools.cache(slow_probe))
    cgroups.probe_in_background()
    assert started.wait(10)
    answers: list[object] = []
    caller = threading.Thread(target=lambda: answers.append(cgroups.backend()))
    caller.start()
    caller.join(0.2)
    assert caller.is_alive()  # waiting on the probe, not probing again
    release.set()
    caller.join(10)
    assert answers == ["probed once"]
    assert calls == 1


def test_the_background_probe_finds_what_a_direct_call_finds(fresh_probe: None) -> None:
    direct = cgroups.backend()
    cgroups._probe.cache_clear()
    cgroups.probe_in_background()
    background = cgroups.backend()
    assert background == direct
