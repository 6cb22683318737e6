"""Attacks on what the ranked timing trusts: the input generator, the harness's stand-in, the
timer on short kernels, the secret seed, and tasks whose cases carry no seed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cluster_manager.core.models import Task
from cluster_manager.core.task import load_task
from tests.adversarial.helpers import (
    IDENTITY_REFERENCE,
    SECRET,
    attack,
    failed_in,
    ranked_at_least,
    stdout_of,
)
from tests.conftest import write_task

pytestmark = pytest.mark.adversarial

# A kernel that takes 5 ms unless it finds the answer ready.
SLEEPY = 0.005


@pytest.mark.reliability(
    "Anti-cheat",
    "wrapping the task's generate_input in the worker: compute each answer while the inputs "
    "are made, off the clock, and only look it up in the timed call",
    "the worker never makes inputs (the harness sends them): ranked at the kernel's real time",
)
def test_hooking_the_input_generator_moves_no_work_off_the_clock(timed_identity, record_property):
    """Attack: the worker used to make each timed iteration's inputs itself with the task's
    `generate_input`; wrap it so it also computes the answer (5 ms) and keeps it by data
    pointer, and let the timed call only look it up. Expected: inputs are made in the harness
    process and sent as data, so the hook never runs: the score is the 5 ms the work takes."""
    code = f"""
    import time
    import reference

    answers = {{}}
    original = reference.generate_input

    def generate_input(*args, **kwargs):
        data = original(*args, **kwargs)
        time.sleep({SLEEPY})
        answers[data.data_ptr()] = data.clone()
        return data

    reference.generate_input = generate_input

    def custom_kernel(data):
        ready = answers.pop(data.data_ptr(), None)
        if ready is not None:
            return ready
        time.sleep({SLEEPY})
        return data.clone()
    """
    result = attack(timed_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.8 * SLEEPY), (result.message, result.score)
    assert result.passed, result.message


STOP_THE_OTHERS = f"""
import os, signal, threading, time

def others():
    mine = {{os.getpid(), os.getppid()}}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in mine and int(entry) != 1:
            yield int(entry)

def freeze(pid):
    try:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.05)
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass

def custom_kernel(data):
    began = time.perf_counter()
    # The harness's stand-in replays this call next: hold it up, so its slack looks like
    # the time this call hides after reporting nothing.
    for pid in others():
        threading.Thread(target=freeze, args=(pid,), daemon=True).start()
    time.sleep({SLEEPY})
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "stopping the harness's helper processes (SIGSTOP) so the stand-in's replays look as "
    "slow as the calls, while the timer reports nothing",
    "the signals are refused (syscall filter of the worker): ranked at the 5 ms by the "
    "harness's clock",
)
def test_stopping_the_stand_in_does_not_hide_a_forged_timer(timed_identity, record_property):
    """Attack: report 1 ns for every 5 ms call, and SIGSTOP every other process (the old echo,
    now the stand-in) for 50 ms so its replays take longer than the real calls. Expected: the
    worker may not signal the harness's processes: the stand-in's overhead is what moving
    the data takes, and the score is the 5 ms."""
    forged = "from cluster_manager.harness import timing\ntiming.CpuTimer.stop = lambda self: 1.0\n"
    code = forged + STOP_THE_OTHERS
    result = attack(timed_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 0.9 * SLEEPY), (result.message, result.score)


TAKE_THE_PIPE = """
import ctypes, os, signal

libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_open, SYS_pidfd_getfd = 434, 438
seen = []

def custom_kernel(data):
    if not seen:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (os.getpid(), 1):
                continue
            pidfd = libc.syscall(SYS_pidfd_open, int(entry), 0)
            taken = libc.syscall(SYS_pidfd_getfd, pidfd, 3, 0) if pidfd >= 0 else -1
            traced = libc.ptrace(16, int(entry), 0, 0)  # PTRACE_ATTACH
            try:
                os.close(os.open(f"/proc/{entry}/mem", os.O_RDWR))
                memory = True
            except OSError:
                memory = False
            seen.append((int(entry), pidfd >= 0, taken >= 0, traced == 0, memory))
        print("TAKEN", [s for s in seen if s[2] or s[3] or s[4]])
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "taking the harness's helpers' pipes with pidfd_getfd(2), tracing them with ptrace, or "
    "writing their memory through /proc/PID/mem",
    "refused: the stand-in is undumpable, the resource tracker never started, the worker may "
    "not trace: nothing taken",
)
def test_the_harness_processes_cannot_be_traced_or_robbed(identity, record_property):
    """Attack: for every other process in the sandbox, pidfd_open + pidfd_getfd its
    descriptors, PTRACE_ATTACH to it and open its memory for writing (the old echo and
    multiprocessing's resource tracker ran as the same user, dumpable). Expected: every
    attempt is refused."""
    result = attack(identity, TAKE_THE_PIPE)
    taken = [line for line in stdout_of(result).splitlines() if line.startswith("TAKEN")]
    record_property("observed", f"{result.verdict.value}: {taken[:1]}")
    assert taken, stdout_of(result)
    assert all(line == "TAKEN []" for line in taken), taken


@pytest.mark.reliability(
    "Anti-cheat",
    "reporting 1 ns for every call of a 100 µs kernel, inside the old allowance (20-200 µs)",
    "ranked at the 100 µs by the harness's clock",
)
def test_a_forged_timer_on_a_short_kernel_gains_nothing(timed_identity, record_property):
    """Attack: a kernel of 100 µs whose timer reports 1 ns: the old witness held ranked
    means to its clock only beyond an allowance of 20-200 µs, so the kernel ranked near zero.
    Expected: the score is the harness's clock: the 100 µs."""
    code = """
    import time
    from cluster_manager.harness import timing

    timing.CpuTimer.stop = lambda self: 1.0
    _clock = time.perf_counter_ns

    def custom_kernel(data):
        end = _clock() + 100_000
        while _clock() < end:
            pass
        return data.clone()
    """
    result = attack(timed_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert ranked_at_least(result, 90e-6), (result.message, result.score)


def _public_seeds() -> str:
    return """
    import glob
    from cluster_manager.core import protocol

    def public_seeds():
        seeds = []
        for name in glob.glob(".cases-*.txt"):
            for _, case in protocol.parse_tests_file(open(name).read()):
                if protocol.is_integer(case.get("seed")):
                    seeds.append(case["seed"])
        return seeds
    """


@pytest.mark.reliability(
    "Anti-cheat",
    "recovering the secret seed from the seeds the worker is handed (inverting the pairing "
    "of public seed and secret)",
    "the worker is handed no seed, and ranked seeds are a keyed hash: the secret stays unknown",
)
def test_the_secret_seed_cannot_be_recovered(identity, record_property):
    """Attack: record every seed the worker's generator is called with, read the public
    seeds from the cases file, and invert the old Cantor pairing to print the secret. Expected:
    the worker never generates inputs nor sees a seed, so nothing is printed that holds it."""
    code = (
        _public_seeds()
        + """
    import math
    import reference

    original = reference.generate_input

    def inverted(z):
        w = (math.isqrt(8 * z + 1) - 1) // 2
        return w - (z - w * (w + 1) // 2)

    def generate_input(*args, **kwargs):
        seed = kwargs.get("seed")
        for public in public_seeds():
            candidate = inverted(seed)
            print("SECRET?", candidate, "from", public)
        return original(*args, **kwargs)

    reference.generate_input = generate_input

    def custom_kernel(data):
        return data.clone()
    """
    )
    result = attack(identity, code)
    printed = stdout_of(result)
    record_property("observed", f"{result.verdict.value}; secret printed: {str(SECRET) in printed}")
    assert result.passed, result.message
    assert str(SECRET) not in printed


# Scans every writable page of the worker (heap, stacks, data: where a copy of the harness
# would keep what it read) for the secret seed in decimal. The code holds only its first
# digits and the hash of the whole, so it cannot find itself. Then the worker's descriptors
# beyond stdin, stdout and stderr, by what they point at.
HUNT_THE_WORKER = """
import ctypes, hashlib, os

PREFIX, LENGTH, WANTED = {prefix!r}, {length}, {wanted!r}

def seed_copies():
    found = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, permissions = line.split()[:2]
            if not permissions.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            chunk = ctypes.string_at(start, end - start)  # our own pages: no /proc/self/mem
            at = chunk.find(PREFIX)
            while at >= 0:
                found += hashlib.sha256(chunk[at : at + LENGTH]).hexdigest() == WANTED
                at = chunk.find(PREFIX, at + 1)
    return found

def descriptors():
    held = []
    for fd in sorted(int(fd) for fd in os.listdir("/proc/self/fd") if int(fd) > 2):
        try:
            held.append(os.readlink(f"/proc/self/fd/{{fd}}").split(":")[0])
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return held

print("HELD", descriptors(), "COPIES", seed_copies(), flush=True)
hunted = False

def custom_kernel(data):
    # Once per worker, on its first call (the checked one before the timed calls): a scan
    # takes half a second on a loaded machine, too long for every timed call.
    global hunted
    if not hunted:
        hunted = True
        print("COPIES", seed_copies(), flush=True)
    return data.clone()
"""


@pytest.mark.reliability(
    "Anti-cheat",
    "reading every writable page of the submission's own process for the secret seed, and "
    "listing the descriptors it holds (workers are forked from a copy of the harness process)",
    "none found: the copy was taken before the seed was read, and a worker holds only its own pipe",
)
def test_a_workers_memory_and_descriptors_hold_no_secret(identity, record_property):
    """Attack: at import and inside the ranked kernel, search the worker's writable memory for
    the secret seed and list its descriptors. Expected: no copy of the seed (the zygote that
    forks the workers was taken before the harness read it, from a pipe, never the
    environment) and no descriptor but the worker's own socket to the harness (the result
    pipe and the seed's pipe stay with the harness)."""
    secret = str(SECRET).encode()
    code = HUNT_THE_WORKER.format(
        prefix=secret[:6], length=len(secret), wanted=hashlib.sha256(secret).hexdigest()
    )
    result = attack(identity, code)
    printed = stdout_of(result)
    copies = [line.rsplit(" ", 1)[1] for line in printed.splitlines() if "COPIES" in line]
    held = {line.split("COPIES")[0] for line in printed.splitlines() if line.startswith("HELD")}
    record_property("observed", f"{result.verdict.value}; seed copies {copies}; {sorted(held)}")
    assert result.passed, result.message
    assert copies and set(copies) == {"0"}, printed[-2000:]
    assert held == {"HELD ['socket'] "}, held


SEEDLESS_REFERENCE = IDENTITY_REFERENCE.replace(
    "def generate_input(size, seed):", "def generate_input(size, seed=7):"
)


@pytest.fixture
def seedless(tmp_path: Path) -> Task:
    """An identity task whose cases name no seed; its generator takes one, with a default."""
    directory = write_task(
        tmp_path / "seedless",
        reference=SEEDLESS_REFERENCE,
        tests=[{"size": 8}],
        benchmarks=[{"size": 256}],
        extra={"test_timeout": 20, "benchmark_timeout": 4, "ranked_timeout": 4},
    )
    return load_task(directory)


@pytest.mark.reliability(
    "Anti-cheat",
    "memoising outputs by id() on a task whose benchmark cases have no seed",
    "fresh inputs from a seed the harness supplies: wrong_answer (or ranked at the real time)",
)
def test_memoising_by_identity_on_a_task_without_seeds(seedless, record_property):
    """Attack: keep each output by `id()` of its input and return it when the same object
    comes back: without a seed in the case, the old harness reused one input object for every
    timed call. Expected: the harness gives each timed call inputs from a seed of its own (the
    generator takes one): the stale answers are caught, or the work is really done."""
    code = f"""
    import time

    cache = {{}}

    def custom_kernel(data):
        key = id(data)
        if key not in cache:
            time.sleep({SLEEPY})
            cache[key] = data.clone()
        return cache[key]
    """
    result = attack(seedless, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert failed_in(result, "leaderboard") or ranked_at_least(result, 0.8 * SLEEPY), (
        result.message,
        result.score,
    )


def test_an_honest_kernel_ranks_at_its_benchmark_time(timed_identity):
    """The defences cost an honest kernel nothing: its ranked mean is its benchmark mean."""
    code = f"""
    import time

    def custom_kernel(data):
        time.sleep({SLEEPY})
        return data.clone()
    """
    result = attack(timed_identity, code)
    assert result.passed, result.message
    assert result.score is not None and SLEEPY <= result.score <= 1.5 * SLEEPY
