"""What the kernel says of a process's waits for a CPU and of its being stopped: the two facts
the stand-in's overhead is corrected by (`harness/cpu_waits.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from cluster_manager.harness import cpu_waits

SPIN = "while True: pass"


@contextmanager
def spinning(count: int, cpu: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` busy processes, all on one CPU: each waits while another runs."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN], preexec_fn=lambda: os.sched_setaffinity(0, {cpu})
        )
        for _ in range(count)
    ]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait()


def test_a_process_sharing_its_cpu_is_seen_waiting_for_it():
    cpu = min(os.sched_getaffinity(0))
    with spinning(2, cpu) as (first, _):
        time.sleep(0.05)
        before, began = cpu_waits.waited_ns(first.pid), time.monotonic_ns()
        time.sleep(0.5)
        waited = cpu_waits.waited_ns(first.pid) - before
        wall = time.monotonic_ns() - began
    # Two on one CPU: each waits about half the time (more where others share that CPU).
    assert 0.1 * wall < waited <= wall, (waited, wall)


def test_a_process_alone_on_its_cpu_waits_for_nothing_while_it_sleeps():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        before = cpu_waits.waited_ns(sleeper.pid)
        time.sleep(0.3)
        assert cpu_waits.waited_ns(sleeper.pid) == before
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_calling_thread_and_a_gone_process():
    assert cpu_waits.waited_ns() >= 0
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert cpu_waits.waited_ns(gone.pid) == 0  # nothing to take out
    assert cpu_waits.is_stopped(gone.pid)  # nothing to wait for


def test_stopped_is_seen_only_once_the_process_has_stopped():
    cpu = min(os.sched_getaffinity(0))
    with spinning(1, cpu) as (process,):
        assert not cpu_waits.is_stopped(process.pid)
        os.kill(process.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not cpu_waits.is_stopped(process.pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert cpu_waits.is_stopped(process.pid)
        stopped_at = cpu_waits.waited_ns(process.pid)
        time.sleep(0.2)
        assert cpu_waits.waited_ns(process.pid) == stopped_at  # a stopped process waits for nothing
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.05)
        assert not cpu_waits.is_stopped(process.pid)
