"""Slowing or moving the processes that judge a submission: its priority, I/O priority,
scheduling class, CPUs and limits, by process, by thread, by group and for the whole user,
as root and as an ordinary user. The built-in harness's worker tries it on every thread of
the harness and the stand-in; under a task's own eval.py a child of the submission tries it
on the harness, PID 1 of the sandbox."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cluster_manager.core.task import load_task
from tests.adversarial.helpers import judged, stdout_of
from tests.conftest import FIXTURES, write_task

pytestmark = pytest.mark.adversarial

PROBLEMSET = FIXTURES / "problemset" / "vectorsum_py"  # judged by its own eval.py
REFUSED = "Operation not permitted"
# What each attempt printed: {"tried": {name: [outcomes]}, "threads": n, "changed": [...]}.
PROBE = "PROBE"

# Shared by both submissions: the calls by number (no wrapper in Python), and how an attempt
# ended ("ok", or the error's text).
CALLS = """
import ctypes, json, os, platform, resource, struct

libc = ctypes.CDLL(None, use_errno=True)
# ioprio_set (ioprio_get is the next number), sched_setattr
IOPRIO_SET, SCHED_SETATTR = {"x86_64": (251, 314), "aarch64": (30, 274)}[platform.machine()]
IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP, IOPRIO_WHO_USER = 1, 2, 3
IOPRIO_IDLE, IOPRIO_BEST_EFFORT_4 = 3 << 13, (2 << 13) | 4
IDLE_ATTR = struct.pack("=IIQiIQQQ", 48, os.SCHED_IDLE, 0, 0, 0, 0, 0, 0)  # struct sched_attr
BASE = os.getpriority(os.PRIO_PROCESS, 0)  # the judges' too: they start as this process did
CPUS = os.sched_getaffinity(0)
IOPRIO = libc.syscall(IOPRIO_SET + 1, IOPRIO_WHO_PROCESS, 0)


def attempt(call):
    try:
        result = call()
    except OSError as exc:
        return exc.strerror
    return os.strerror(ctypes.get_errno()) if result == -1 else "ok"


GONE = os.strerror(3)  # ESRCH: a thread that ended meanwhile was not tried


def slow(pid, tid):
    one_cpu = {min(CPUS)}
    return {
        "renice": lambda: libc.setpriority(os.PRIO_PROCESS, tid, 19),
        "renice its group": lambda: libc.setpriority(os.PRIO_PGRP, os.getpgid(pid), 19),
        "I/O idle": lambda: libc.syscall(IOPRIO_SET, IOPRIO_WHO_PROCESS, tid, IOPRIO_IDLE),
        "I/O idle its group": lambda: libc.syscall(
            IOPRIO_SET, IOPRIO_WHO_PGRP, os.getpgid(pid), IOPRIO_IDLE),
        "pin": lambda: os.sched_setaffinity(tid, one_cpu),
        "SCHED_IDLE": lambda: os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0)),
        "sched_setparam": lambda: os.sched_setparam(tid, os.sched_param(0)),
        "sched_setattr idle": lambda: libc.syscall(SCHED_SETATTR, tid, IDLE_ATTR, 0),
        "CPU time limit": lambda: resource.prlimit(tid, resource.RLIMIT_CPU, (1, 1)),
    }


SPREAD = {  # every process of the user, and the caller's own group (a judge may share it)
    "renice the user": lambda: libc.setpriority(os.PRIO_USER, 0, 19),
    "renice own group": lambda: libc.setpriority(os.PRIO_PGRP, 0, 19),
    "I/O idle the user": lambda: libc.syscall(IOPRIO_SET, IOPRIO_WHO_USER, 0, IOPRIO_IDLE),
    "I/O idle own group": lambda: libc.syscall(IOPRIO_SET, IOPRIO_WHO_PGRP, 0, IOPRIO_IDLE),
}
ITSELF = {
    "itself: renice": lambda: libc.setpriority(os.PRIO_PROCESS, 0, BASE),
    "itself: I/O priority": lambda: libc.syscall(
        IOPRIO_SET, IOPRIO_WHO_PROCESS, 0, IOPRIO_BEST_EFFORT_4),
    "itself: pin": lambda: os.sched_setaffinity(0, CPUS),
    "itself: scheduling class": lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)),
}


def state(tid):
    try:
        return [os.getpriority(os.PRIO_PROCESS, tid), sorted(os.sched_getaffinity(tid)),
                os.sched_getscheduler(tid), libc.syscall(IOPRIO_SET + 1, IOPRIO_WHO_PROCESS, tid)]
    except OSError:  # ended meanwhile
        return None


def probe(targets):
    tried = {}
    for name, call in [*SPREAD.items(), *ITSELF.items()]:
        tried.setdefault(name, set()).add(attempt(call))
    for pid, tid in targets:
        for name, call in slow(pid, tid).items():
            tried.setdefault(name, set()).add(attempt(call))
    unchanged = [BASE, sorted(CPUS), os.SCHED_OTHER, IOPRIO]
    states = {f"{pid}/{tid}": state(tid) for pid, tid in targets}
    changed = [f"{t}: {now}" for t, now in states.items() if now not in (None, unchanged)]
    tried = {name: how - {GONE} for name, how in tried.items()}
    threads = sum(pid != tid for pid, tid in targets)
    processes = len({pid for pid, _ in targets})
    report = {"tried": {k: sorted(v) for k, v in tried.items()}, "threads": threads,
              "processes": processes}
    print("PROBE", json.dumps({**report, "changed": changed}), flush=True)
"""

# The worker of the built-in harness, in its calls: every thread of every process outside its
# own group (the harness, the zygote, the stand-in), several times over the ranked phase, so
# that the thread pools the harness and the stand-in start for large inputs are there.
RESCHEDULE_THE_JUDGES = (
    CALLS
    + """
calls = [0]


def judges():
    own = os.getpgid(0)
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.getpgid(pid) != own:
                yield from ((pid, int(t)) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue


def custom_kernel(data):
    calls[0] += 1
    if calls[0] in (5, 20, 60, 150, 400):
        probe(list(judges()))
    return data.clone()
"""
)

# Under the problem set's eval.py the submission runs in the harness's own process: a child of
# it (as where such a harness runs the submission in a child) shares the harness's process
# group, so even its own group's priority is the harness's.
RESCHEDULE_THE_HARNESS = (
    CALLS
    + """
import torch
from task import input_t, output_t

HARNESS = 1
if os.fork() == 0:
    probe([(HARNESS, HARNESS)])
    os._exit(0)
os.wait()


def custom_kernel(data: input_t) -> output_t:
    return torch.sum(data)
"""
)


def _probes(text: str) -> list[dict]:
    return [json.loads(ln.split(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(PROBE)]


def _summary(result_verdict: str, probes: list[dict]) -> str:
    tried = {name: how for probe in probes for name, how in probe["tried"].items()}
    refused = sum(how == [REFUSED] for name, how in tried.items() if not name.startswith("it"))
    allowed = sum(how == ["ok"] for name, how in tried.items() if name.startswith("itself"))
    threads = max((probe["threads"] for probe in probes), default=0)
    changed = sum(len(probe["changed"]) for probe in probes)
    return (
        f"{result_verdict}; {len(probes)} probes, {threads} threads besides the judges' first; "
        f"{refused} kinds of attempt refused, {allowed} on itself allowed; {changed} changed"
    )


def _assert_kept_off(probes: list[dict]) -> None:
    assert probes, "the submission never reported"
    for probe in probes:
        tried = probe["tried"]
        itself = {name: how for name, how in tried.items() if name.startswith("itself")}
        others = {name: how for name, how in tried.items() if name not in itself}
        assert others and all(how == [REFUSED] for how in others.values()), others
        assert all(how == ["ok"] for how in itself.values()), itself
        assert probe["changed"] == [], probe["changed"]


@pytest.mark.reliability(
    "Anti-cheat",
    "from the built-in harness's worker, on every thread of the harness, zygote and stand-in "
    "(thread pools too): renice, I/O idle, pin, SCHED_IDLE, sched_setparam, sched_setattr, a "
    "CPU limit; by group, own group and user",
    "each refused (EPERM) by the worker's filter, their priority, CPUs, class and I/O priority "
    "unchanged; the worker may still renice, pin and schedule itself (root and ordinary user)",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "user"])
def test_the_worker_cannot_slow_or_move_any_thread_that_judges_it(
    plain_user, tmp_path: Path, record_property
):
    # 4 Mi elements: the harness and the stand-in copy them on a pool of threads.
    task = load_task(
        write_task(
            tmp_path / "identity",
            benchmarks=[{"size": 1 << 22, "seed": 3}],
            extra={"test_timeout": 20, "benchmark_timeout": 4, "ranked_timeout": 4},
        )
    )
    result = judged(task, RESCHEDULE_THE_JUDGES, plain_user=plain_user)
    probes = _probes(stdout_of(result))
    threads = max((probe["threads"] for probe in probes), default=0)
    record_property("observed", _summary(result.verdict.value, probes))
    _assert_kept_off(probes)
    # The ranked phase's judges: the harness, the zygote and the stand-in.
    assert max(probe["processes"] for probe in probes) >= 3, probes
    if len(os.sched_getaffinity(0)) > 1:  # one CPU: torch starts no pool, every id is a pid
        assert threads > 0, probes
    assert result.passed, result.message


@pytest.mark.reliability(
    "Anti-cheat",
    "under a task's own eval.py, a child of the submission renices the harness (PID 1), its "
    "group, its own group (the harness's) and the whole user, idles their I/O, pins the harness "
    "to one CPU, makes it SCHED_IDLE and caps its CPU time",
    "each refused (EPERM) by the sandbox's filter, the harness's priority, CPUs, class and I/O "
    "priority unchanged; the child may still renice, pin and schedule itself (root and "
    "ordinary user)",
)
@pytest.mark.parametrize("plain_user", [False, True], ids=["root", "user"])
def test_a_tasks_own_harness_cannot_be_rescheduled(plain_user, record_property):
    result = judged(load_task(PROBLEMSET), RESCHEDULE_THE_HARNESS, plain_user=plain_user)
    probes = _probes(stdout_of(result))
    record_property("observed", _summary(result.verdict.value, probes))
    _assert_kept_off(probes)
    assert result.passed, result.message
