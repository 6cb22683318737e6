"""The zygote: the harness's processes are forked from a copy of it, each at the other end of
a pipe of its own, and collected once they end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cluster_manager.harness import workers
from cluster_manager.harness.zygote import Zygote


def _state(pid: int) -> str | None:
    """The process's state letter (Z: ended, not yet collected); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _wait_for(pid: int, states: set[str | None]) -> str | None:
    deadline = time.monotonic() + 10
    while (state := _state(pid)) not in states:
        assert time.monotonic() < deadline, f"process {pid} stayed {state}"
        time.sleep(0.01)
    return state


def test_each_process_answers_on_its_own_pipe(zygote: Zygote):
    first, second = workers.StandIn(zygote), workers.StandIn(zygote)
    try:
        assert first.process.pid != second.process.pid != zygote.pid
        assert first.round_trip() > 0 and second.round_trip() > 0
    finally:
        first.stop()
        second.stop()


def test_a_process_whose_harness_hangs_up_ends_and_is_collected(zygote: Zygote):
    worker = workers.WorkerProcess(zygote)
    pid = worker.process.pid
    worker.connection.close()  # the harness hangs up: the worker's loop ends on its own
    assert _wait_for(pid, {"Z", None}) == "Z"
    other = workers.StandIn(zygote)  # the zygote collects what ended before each request
    try:
        assert _state(pid) is None
    finally:
        other.stop()


def test_a_killed_process_is_collected_and_the_zygote_ends_with_its_channel(zygote: Zygote):
    stand_in = workers.StandIn(zygote)
    stand_in.stop()
    assert _wait_for(stand_in.process.pid, {"Z", None}) in {"Z", None}
    zygote.close()
    assert _state(zygote.pid) is None
    with pytest.raises(OSError, match="the process that starts the workers is gone"):
        workers.StandIn(zygote)
