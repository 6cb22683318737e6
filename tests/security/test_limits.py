"""A submission that tries to take the host's memory, disk or process table, through the real
runner entrypoint as root and as an ordinary user.

Memory of every kind is bounded by a cgroup where the runner has one: a memfd hoard ends as
`memory_limit`. Where it has none (an ordinary user without cgroup delegation, as on this test
machine), the run says `limits: rlimits only (why)` and its score is held back, and what no
rlimit counts is still bounded: memfd_create and System V IPC are refused, and the run's
writable space (HOME, TMPDIR, /tmp, /var/tmp, /dev/shm: tmpfs capped in all on both; the rest
of the sandbox's root read-only) is no larger than its memory cap. Processes are capped on
both (pids.max, or RLIMIT_NPROC over the user's own count).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster_manager.core.models import Limits, Mode
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sandboxing import (
    ALLOW_SETTING,
    LIMITS_KEY,
    RLIMITS_ONLY,
    SANDBOX_KEY,
    ranking_hold,
)
from cluster_manager.harness.environment import user_tasks
from cluster_manager.sandbox import cgroups
from cluster_manager.sandbox.plan import PRIVATE_MOUNTS, UNCOUNTED_REFUSED
from tests.adversarial.helpers import SECRET, small_task
from tests.conftest import CORRECT, make_request
from tests.security.runners import ensure_plain_user, run_entrypoint

pytestmark = [pytest.mark.adversarial, pytest.mark.slow]

MIB = 1 << 20
MEMORY = 1024 * MIB  # torch and the harness take about 450 MiB of it
DISK = 512 * MIB  # five tmpfs mounts of 102 MiB each
PROCESSES = 300
# Each attack asks for 2 GiB of tmpfs, memfd or disk pages; a bounded one gets at most its cap.
HOST_MARGIN = 1024 * MIB
# A run's own processes (harness, worker and stand-in each import torch) take up to ~1.5 GiB of
# the host's available memory, and other tests on the machine may take some meanwhile: so
# MemAvailable is checked only loosely, and the attack's own pages through Shmem (tmpfs and
# memfd pages), which nothing else in a test run grows by a GiB.
RUN_FOOTPRINT = 2048 * MIB
HOST_LOCK = Path(tempfile.gettempdir()) / "cm-host-watched-tests.lock"

MEMFD_HOARD = """
import os
wanted, held, fds = 2048, 0, []
chunk = b"x" * (1 << 20)
while held < wanted:
    fd = os.memfd_create("hoard")
    for _ in range(64):
        os.write(fd, chunk)
    fds.append(fd)
    held += 64
print(f"HOARDED {held} MiB", flush=True)
"""

FILL = """
import os
chunk = b"x" * (1 << 20)
written, error, n = 0, "", 0
try:
    while written < 2048:
        path = os.path.join(TARGETS[n % len(TARGETS)], f"fill-{n}")
        n += 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for _ in range(64):
                os.write(fd, chunk)
                written += 1
        finally:
            os.close(fd)
except OSError as exc:
    error = exc.strerror
print(f"FILLED {written} MiB {error}", flush=True)
if error:
    raise OSError(28, error)
"""

FORK_BOMB = """
import os, signal
children, error = [], ""
try:
    for _ in range(600):
        pid = os.fork()
        if pid == 0:  # small: the worker's pages are not kept
            os.execv("/bin/sleep", ["sleep", "60"])
        children.append(pid)
except OSError as exc:
    error = exc.strerror
print(f"FORKED {len(children)} {error}", flush=True)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
if error:
    raise OSError(11, error)
"""


@dataclass
class Host:
    available: int  # MemAvailable
    shmem: int  # Shmem: tmpfs and memfd pages, wherever they are mounted
    disk_free: int  # where run directories live

    @classmethod
    def now(cls) -> Host:
        lines = Path("/proc/meminfo").read_text().splitlines()
        kib = {key: int(value.split()[0]) * 1024 for key, value in (x.split(":") for x in lines)}
        disk_free = shutil.disk_usage(tempfile.gettempdir()).free
        return cls(kib["MemAvailable"], kib["Shmem"], disk_free)

    def worst(self, other: Host) -> Host:
        return Host(
            min(self.available, other.available),
            max(self.shmem, other.shmem),
            min(self.disk_free, other.disk_free),
        )


@contextlib.contextmanager
def host_watched(
    memory_margin: int = RUN_FOOTPRINT + HOST_MARGIN, shmem_margin: int = HOST_MARGIN
) -> Iterator[list[Host]]:
    """Samples the host while the block runs: its shared pages may not grow by
    `shmem_margin`, its free disk not drop by `HOST_MARGIN`, and its available memory not by
    `memory_margin`, at any moment nor afterwards. Yields [before, worst seen], filled in
    when the block ends. One block at a time on the machine (both test processes, any pytest
    session): what one attack holds for its cap would read as another's escape."""
    with _host_to_itself():
        yield from _watched(memory_margin, shmem_margin)


@contextlib.contextmanager
def _host_to_itself() -> Iterator[None]:
    fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the lock


def _watched(memory_margin: int, shmem_margin: int) -> Iterator[list[Host]]:
    before, lowest = Host.now(), [Host.now()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            lowest[0] = lowest[0].worst(Host.now())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    seen_at = [before]
    try:
        yield seen_at
    finally:
        stop.set()
        sampler.join()
        seen_at.append(lowest[0])
    for seen in (lowest[0], Host.now()):
        assert seen.shmem < before.shmem + shmem_margin, (before, seen)
        assert seen.disk_free > before.disk_free - HOST_MARGIN, (before, seen)
        assert seen.available > before.available - memory_margin, (before, seen)


def _submission(attack: str, targets: str = "[]") -> str:
    """`targets`: a Python expression, evaluated in the submission."""
    return f"import os\nTARGETS = {targets}\n" + textwrap.dedent(attack) + "\n" + CORRECT


def _run(
    tmp_path: Path, code: str, plain_user: bool, limits: Limits, mode: Mode = Mode.TEST
) -> RunResult:
    task = small_task(tmp_path / f"task-{os.urandom(4).hex()}")
    request = make_request(task, code, mode, seed=SECRET, limits=limits)
    payload_dir = Path(tempfile.mkdtemp(prefix="cm-payload-"))
    try:
        result, _, _ = run_entrypoint(
            request, plain_user=plain_user, env={}, payload_dir=payload_dir
        )
    finally:
        shutil.rmtree(payload_dir, ignore_errors=True)
    return result


def _stdout(result: RunResult) -> str:
    return "\n".join(p.stdout for p in result.phases)


def _reported(result: RunResult, word: str) -> list[str]:
    line = next((ln for ln in _stdout(result).splitlines() if ln.startswith(word)), "")
    assert line, f"the attack never reported: {result.message}"
    return line.split()


def _grouped(result: RunResult) -> bool:
    return not str(result.system.get(LIMITS_KEY, "")).startswith(RLIMITS_ONLY)


# Fills every file system the run can write to (HOME, TMPDIR, /tmp, /var/tmp, /dev/shm, and
# whatever else is writable: bubblewrap's own root and /dev are tmpfs too) until it is full,
# up to twice the memory cap in all; asks for 1000 System V semaphore sets of 32000 each
# (about 2 GiB of the kernel's memory, counted by no rlimit) and message queues; then hoards
# 8 GiB in memfds.
UNCOUNTED_HOARD = """
import ctypes, os
chunk, budget = b"x" * (1 << 20), 2 * CAP_MIB
filled, n, seen = 0, 0, set()


def places():
    # Every file system is a mount: each mount point, the sandbox's root and /dev included.
    with open("/proc/self/mountinfo") as mounts:
        points = [line.split()[4] for line in mounts]
    kernel = ("/proc", "/sys")
    return [p for p in points if os.path.isdir(p) and not p.startswith(kernel)]


for place in places():
    device = os.stat(place).st_dev
    if filled >= budget or device in seen or not os.access(place, os.W_OK):
        continue
    seen.add(device)
    try:
        while filled < budget:
            fd = os.open(os.path.join(place, f"fill-{n}"), os.O_WRONLY | os.O_CREAT, 0o600)
            n += 1
            try:
                for _ in range(64):
                    os.write(fd, chunk)
                    filled += 1
            finally:
                os.close(fd)
    except OSError as exc:
        print(f"FULL {place} at {filled} MiB: {exc.strerror}", flush=True)
print(f"FILLED {filled} MiB", flush=True)
libc = ctypes.CDLL(None, use_errno=True)
for name, make in (("SEMGET", lambda: libc.semget(0, 32000, 0o600)),
                   ("MSGGET", lambda: libc.msgget(0, 0o600))):
    made = 0
    while made < 1000 and make() >= 0:
        made += 1
    print(name, made, os.strerror(ctypes.get_errno()) if made < 1000 else "", flush=True)
held, fds = 0, []
while held < 8192:
    fd = os.memfd_create("hoard")  # no try: a refusal ends the run with its error
    for _ in range(256):
        os.write(fd, chunk)
    fds.append(fd)
    held += 256
print(f"HOARDED {held} MiB", flush=True)
"""


@pytest.fixture(params=["root", "plain user"])
def kind(request: pytest.FixtureRequest) -> str:
    if os.geteuid() != 0:
        pytest.skip("runs the entrypoint as root and as an ordinary user: needs root")
    return str(request.param)


@pytest.mark.reliability(
    "Sandbox",
    "holding 2 GiB in memfds (no rlimit counts them) under a 1 GiB memory cap, with a correct "
    "run beside it, as root",
    "memory_limit from the run's cgroup; the host's free memory and the other run unaffected",
)
def test_a_memfd_hoard_hits_the_memory_limit_as_root(tmp_path: Path, record_property):
    if os.geteuid() != 0:
        pytest.skip("the root runner needs root")
    assert not isinstance(cgroups.backend(), str), cgroups.backend()
    limits = Limits(memory_bytes=MEMORY, disk_bytes=DISK, grace=30)
    beside: list[RunResult] = []
    other = threading.Thread(
        target=lambda: beside.append(_run(tmp_path, CORRECT, False, limits)), daemon=True
    )
    # The hoarding run may take its cap and the run beside it its footprint; not the 2 GiB.
    with host_watched(MEMORY + RUN_FOOTPRINT):
        other.start()
        result = _run(tmp_path, _submission(MEMFD_HOARD), False, limits)
        other.join(timeout=200)
    assert "HOARDED" not in _stdout(result)
    assert result.verdict.value == "memory_limit", result.message
    assert "memory limit of 1024 MiB" in result.message
    assert result.system[SANDBOX_KEY] == "full" and _grouped(result), result.system
    assert beside and beside[0].passed, beside and beside[0].message
    record_property("observed", f"root: {result.message}; the run beside it passed")


@pytest.mark.reliability(
    "Sandbox",
    "an ordinary user's runner with no cgroup it may write (no systemd user delegation) runs a "
    "ranked submission",
    "the run says limits: rlimits only with why, and its score is held back like a partial "
    "sandbox's",
)
def test_without_a_cgroup_the_run_says_rlimits_only_and_is_not_ranked(
    tmp_path: Path, record_property
):
    if os.geteuid() != 0:
        pytest.skip("switches to an ordinary user: needs root")
    limits = Limits(memory_bytes=8 << 30, disk_bytes=DISK, grace=30)
    result = _run(tmp_path, CORRECT, True, limits, Mode.LEADERBOARD)
    assert result.passed, result.message
    limits_line = str(result.system.get(LIMITS_KEY))
    if _grouped(result):  # a machine that delegates cgroups to the user: nothing held back
        assert limits_line.startswith("cgroup v2"), limits_line
        assert ranking_hold(result.system, allow_unsandboxed=False) is None
        pytest.skip(f"this machine delegates cgroups to an ordinary user: {limits_line}")
    assert limits_line.startswith(f"{RLIMITS_ONLY} ("), result.system
    assert "not writable by this user" in limits_line or "delegated" in limits_line
    hold = ranking_hold(result.system, allow_unsandboxed=False)
    assert hold is not None and RLIMITS_ONLY in hold and ALLOW_SETTING in hold
    assert ranking_hold(result.system, allow_unsandboxed=True) is None
    record_property("observed", f"plain user: {limits_line}")


@pytest.mark.reliability(
    "Sandbox",
    "filling /dev/shm (2 GiB asked) under a 512 MiB disk cap",
    "ENOSPC at a fifth of the cap; the message names the disk limit; the host unaffected",
)
def test_filling_dev_shm_stops_at_the_disk_limit(tmp_path: Path, kind: str, record_property):
    limits = Limits(memory_bytes=8 << 30, disk_bytes=DISK, grace=30)
    with host_watched():
        result = _run(tmp_path, _submission(FILL, '["/dev/shm"]'), kind == "plain user", limits)
    written = int(_reported(result, "FILLED")[1])
    assert written <= DISK // MIB // 5 + 1, written
    assert "disk limit of 512 MiB" in result.message, result.message
    record_property("observed", f"{kind}: {written} MiB written, then ENOSPC; {result.message}")


@pytest.mark.reliability(
    "Sandbox",
    "filling $HOME and $TMPDIR (2 GiB in 64 MiB files, each under the file-size cap) under a "
    "512 MiB disk cap",
    "ENOSPC before the cap; nothing reaches the host's disk; the message names the disk limit",
)
def test_filling_home_and_tmpdir_stops_at_the_disk_limit(
    tmp_path: Path, kind: str, record_property
):
    limits = Limits(memory_bytes=8 << 30, disk_bytes=DISK, grace=30)
    code = _submission(FILL, '[os.environ["HOME"], os.environ["TMPDIR"]]')
    with host_watched():
        result = _run(tmp_path, code, kind == "plain user", limits)
    written = int(_reported(result, "FILLED")[1])
    assert written <= DISK // MIB, written
    assert "disk limit of 512 MiB" in result.message, result.message
    record_property("observed", f"{kind}: {written} MiB written, then ENOSPC")


@pytest.mark.reliability(
    "Sandbox",
    "a fork bomb of 600 processes under a 300-process cap",
    "fork fails before the cap (pids.max, or RLIMIT_NPROC over the user's own processes), "
    "the message names the limit where a cgroup holds it; the host unaffected",
)
def test_a_fork_bomb_is_bounded(tmp_path: Path, kind: str, record_property):
    limits = Limits(memory_bytes=8 << 30, disk_bytes=DISK, processes=PROCESSES, grace=30)
    plain = kind == "plain user"
    with host_watched():
        # What the user runs besides: RLIMIT_NPROC's budget comes on top of it, and a run of
        # the same user (another test's) that ends meanwhile leaves its share to this one.
        besides = user_tasks(ensure_plain_user().pw_uid) if plain else 0
        result = _run(tmp_path, _submission(FORK_BOMB), plain, limits)
    forked = int(_reported(result, "FORKED")[1])
    if _grouped(result):
        assert forked < PROCESSES, forked
        assert "process limit was reached" in result.message, result.message
    else:  # RLIMIT_NPROC: the budget on top of what the user already runs
        assert forked < PROCESSES + besides, (forked, besides)
        assert result.system[LIMITS_KEY].startswith(RLIMITS_ONLY)
    record_property(
        "observed", f"{kind}: {forked} forked, then EAGAIN ({result.system[LIMITS_KEY]})"
    )


@pytest.mark.reliability(
    "Sandbox",
    "filling every place it can write (4 GiB disk cap), 1000 System V semaphore sets of 32000 "
    "(~2 GiB of kernel memory), message queues, then 8 GiB of memfds, under a 1.5 GiB cap, as "
    "root and as a user without cgroup delegation",
    "memory_limit either way: root from the run's cgroup; ordinary user: only the five tmpfs "
    "mounts are writable, at most the memory cap in all, and semget, msgget and memfd_create "
    "are refused (ENOMEM), named in the message; the host's shared and available memory drop "
    "by less than twice the cap (one run of the same size may run beside it)",
)
def test_uncounted_memory_is_bounded_by_the_memory_cap(tmp_path: Path, kind: str, record_property):
    memory = 1536 * MIB
    limits = Limits(memory_bytes=memory, disk_bytes=4096 * MIB, grace=30)
    # Host-wide: the run's cap, and as much again for what else runs on the machine (the
    # watched tests take turns; others may not); 8 GiB held would be far past it.
    with host_watched(2 * memory + RUN_FOOTPRINT, shmem_margin=2 * memory) as seen:
        hoard = _submission(f"CAP_MIB = {memory // MIB}\n" + UNCOUNTED_HOARD)
        result = _run(tmp_path, hoard, kind == "plain user", limits)
    grown = (seen[1].shmem - seen[0].shmem) // MIB
    assert "HOARDED" not in _stdout(result)
    what = result.message[-120:]
    if _grouped(result):
        assert result.verdict.value == "memory_limit", result.message
        assert "memory limit of 1536 MiB" in result.message
    else:
        assert UNCOUNTED_REFUSED in result.system[LIMITS_KEY], result.system
        # A mount's last write may end short of the MiB it counts.
        filled = int(_reported(result, "FILLED")[1])
        assert filled <= memory // MIB + PRIVATE_MOUNTS, _stdout(result)
        for call in ("SEMGET", "MSGGET"):
            assert _reported(result, call)[1:] == ["0", "Cannot", "allocate", "memory"], call
        assert result.verdict.value == "memory_limit", result.message
        assert "(shmget, semget, msgget) are refused" in result.message
        what = f"{filled} MiB written in all, semget and msgget refused; {what}"
    record_property(
        "observed",
        f"{kind} ({result.system[LIMITS_KEY].split(' (')[0]}): {result.verdict.value}, host "
        f"Shmem grew by at most {grown} MiB; {what}",
    )
