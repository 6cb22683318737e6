"""Waiting for the task's process: woken by its exit, bounded by its timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster_manager.sandbox import process


def _sleeper(seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


@pytest.fixture(params=["pidfd", "polling"])
def wait_kind(request, monkeypatch) -> str:
    """Both ways of waiting: a pidfd, and Popen's polling where pidfd_open is missing."""
    if request.param == "polling":

        def no_pidfd(pid: int) -> int:
            raise OSError("pidfd_open is not available")

        monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    return request.param


def test_wait_reports_an_exit_within_the_timeout(wait_kind):
    proc = _sleeper(0.1)
    try:
        assert process._wait_for_exit(proc, timeout=30)
        assert proc.poll() == 0  # not reaped by the wait: Popen still gets the status
    finally:
        proc.kill()
        proc.wait()


def test_wait_gives_up_at_the_timeout_and_leaves_the_process_alone(wait_kind):
    proc = _sleeper(30)
    try:
        began = time.monotonic()
        assert not process._wait_for_exit(proc, timeout=0.2)
        assert 0.2 <= time.monotonic() - began < 10
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_wait_takes_timeouts_beyond_what_poll_accepts_at_once():
    proc = _sleeper(0.05)
    try:
        assert process._wait_for_exit(proc, timeout=process.MAX_POLL_MS)  # about 25 days
    finally:
        proc.kill()
        proc.wait()


def _run_tree(tmp_path: Path, code: str, timeout: float) -> process.ProcessResult:
    return process.run_tree(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=timeout,
        output_cap=1024,
        limits=process.ResourceLimits(),
    )


def test_run_tree_times_out_a_process_that_outlives_its_timeout(tmp_path: Path):
    code = "import time; print('started', flush=True); time.sleep(30)"
    result = _run_tree(tmp_path, code, timeout=5.0)  # time enough to start on a busy machine
    assert result.timed_out and result.exit_code is None
    assert 5.0 <= result.duration_s < 15
    assert "started" in result.stdout


def test_run_tree_returns_the_exit_status_of_a_quick_process(tmp_path: Path):
    result = _run_tree(tmp_path, "raise SystemExit(3)", timeout=30)
    assert not result.timed_out and result.exit_code == 3
