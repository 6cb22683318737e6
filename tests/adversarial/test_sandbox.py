"""Attacks on the machine and on other runs: secrets, processes, memory, files and network."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_manager.core.models import Limits, Mode, Verdict
from cluster_manager.core.task import load_task
from cluster_manager.launchers.local import LocalLauncher
from cluster_manager.sandbox import namespaces
from tests.adversarial.helpers import (
    LIMITS,
    SECRET,
    attack,
    attack_entrypoint,
    not_ranked,
    processes_of,
    request_for,
    sandbox_uid,
    small_task,
    stdout_of,
)
from tests.conftest import CORRECT, EXAMPLES, make_request, processes_with

pytestmark = pytest.mark.adversarial

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox user needs root")
needs_netns = pytest.mark.skipif(
    namespaces.probe(namespaces.Isolation(network=True)) is not None,
    reason="no network namespaces here (neither root nor unprivileged user namespaces)",
)
FAST_FAIL = dataclasses.replace(LIMITS, grace=0)


def _leftovers(result, marker: str) -> list[int]:
    uid = sandbox_uid(result)
    return processes_with(marker) + (processes_of(uid) if uid is not None else [])


@pytest.mark.reliability(
    "Sandbox",
    "searching the env, every /proc/*/environ and /proc/*/cmdline for the secret seed and tokens",
    "passed; no seed, POPCORN_* variable or launcher token found",
)
def test_hunting_for_the_secret_seed_and_tokens(tmp_path: Path, record_property):
    """Attack: look for POPCORN_SEED, POPCORN_FD and a launcher token in the environment, in
    /proc/<ppid>/environ, in every /proc/*/environ and in every process's cmdline. Expected:
    none of them is found (the harness and the runner are undumpable, /proc is limited to the
    run's own processes, the request arrives on stdin)."""
    code = f"""
    import glob, os

    NEEDLES = (b"POPCORN_SEED", b"POPCORN_FD", b"CM_FAKE_TOKEN", b"{SECRET}")

    def hunt():
        found = [k for k in os.environ if k.encode().startswith(NEEDLES[:3])]
        paths = glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline")
        for path in paths + [f"/proc/{{os.getppid()}}/environ"]:
            try:
                with open(path, "rb") as fh:
                    text = fh.read()
            except OSError:
                continue
            found += [f"{{path}}:{{n.decode()}}" for n in NEEDLES if n in text]
        return found

    print("HUNT", hunt(), flush=True)

    def custom_kernel(data):
        print("HUNT", hunt(), flush=True)
        return data.clone()
    """
    task = small_task(tmp_path / "t")
    result, _ = attack_entrypoint(request_for(task, code), env={"CM_FAKE_TOKEN": "t0k3n"})
    assert result.passed, result.message
    out = stdout_of(result)
    record_property(
        "observed",
        f"{result.verdict.value}; {out.count('HUNT []')} of {out.count('HUNT ')} hunts "
        "found nothing",
    )
    assert out.count("HUNT []") >= 4, out[-2000:]
    for needle in ("POPCORN", "CM_FAKE_TOKEN", str(SECRET)):
        assert needle not in out


@pytest.mark.reliability(
    "Sandbox",
    "spinning forever after starting a grandchild in a new session (4 s test timeout)",
    "timeout within timeout + 5 s; no process of the run or its user left",
)
def test_kernel_that_never_ends_in_its_own_session(tmp_path: Path, record_property):
    """Attack: start a grandchild in a new session, then spin forever. Expected: timeout within
    timeout + 5 s, and no process of the run (nor of its user) is left."""
    marker = f"cm-adv-spin-{uuid.uuid4().hex}"
    task = small_task(tmp_path / "t", test_timeout=4)
    code = f"""
    import subprocess, sys

    def custom_kernel(data):
        command = [sys.executable, "-c", "import time; time.sleep(600)", {marker!r}]
        try:
            subprocess.Popen(command, start_new_session=True)
        except PermissionError:  # a worker may not leave its group: then in it
            subprocess.Popen(command)
        while True:
            pass
    """
    result, elapsed = attack_entrypoint(request_for(task, code, limits=FAST_FAIL))
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.verdict is Verdict.TIMEOUT, result.message
    assert result.phases[0].duration_s < 4 + 5
    assert elapsed < 4 + 5 + 30  # the runner process itself starts on a busy machine
    time.sleep(0.2)
    leftovers = _leftovers(result, marker)
    record_property(
        "observed",
        f"{result.verdict.value}: {result.message}; phase killed after "
        f"{result.phases[0].duration_s:.1f} s, {len(leftovers)} processes left",
    )
    assert leftovers == []


@pytest.mark.reliability(
    "Sandbox",
    "allocating 64 GiB in the kernel (6 GiB memory limit)",
    "memory_limit, never ranked",
)
def test_memory_bomb(identity, record_property):
    """Attack: allocate 64 GiB. Expected: memory_limit (the address-space limit)."""
    code = """
    import torch

    def custom_kernel(data):
        hog = torch.empty(64 << 30, dtype=torch.uint8)
        return data.clone()
    """
    result = attack(identity, code, limits=Limits(memory_bytes=6 << 30, grace=10))
    error = [line for t in result.tests for line in t.error.strip().splitlines()[-1:]]
    record_property("observed", f"{result.verdict.value}: {' '.join(error[:1]) or result.message}")
    assert result.verdict is Verdict.MEMORY_LIMIT, result.message
    assert not_ranked(result)


@needs_root
@pytest.mark.reliability(
    "Sandbox",
    "writing 1.5 GiB of files to /dev/shm (RAM no address-space limit counts)",
    "writes fail at no more than 1 GiB in the run's private /dev/shm",
)
def test_memory_bomb_in_shared_memory_files(identity, record_property):
    """Attack: fill /dev/shm (RAM that no address-space limit counts) with 1.5 GiB of files.
    Expected: the run's private /dev/shm holds at most 1 GiB: the writes fail, RAM is safe."""
    code = """
    import os

    def custom_kernel(data):
        chunk = b"x" * (64 << 20)
        written = 0
        try:
            for i in range(24):
                with open(f"/dev/shm/hog-{i}", "wb") as fh:
                    fh.write(chunk)
                written += len(chunk)
        except OSError as exc:
            print("STOPPED", written >> 20, "MiB:", exc, flush=True)
        return data.clone()
    """
    result = attack(identity, code, Mode.TEST)
    assert result.system["filesystem"] == "private", result.system
    out = stdout_of(result)
    stopped = [line for line in out.splitlines() if line.startswith("STOPPED")]
    record_property(
        "observed", f"{result.system.get('filesystem')} /dev/shm; {' '.join(stopped[:1])}"
    )
    assert "STOPPED" in out and "No space left" in out, out[-1000:]
    assert int(out.split("STOPPED")[1].split()[0]) <= 1024


@needs_root
@pytest.mark.reliability(
    "Sandbox",
    "forking in every process up to 2**10 copies, the copies sleeping for 10 minutes",
    "forks refused by the process limit, wrong_answer, no process of the run's user left",
)
def test_fork_bomb(tmp_path: Path, record_property):
    """Attack: every process forks again, up to 2**10 of them; the copies sleep while the
    original returns a wrong answer. Expected: the sandbox user's process limit refuses forks
    long before that, the run ends (wrong_answer) and no process of its user is left."""
    marker = f"cm-adv-bomb-{uuid.uuid4().hex}"
    # Hundreds of forks of an interpreter holding torch take a while on a busy machine.
    task = small_task(tmp_path / "t", test_timeout=60)
    code = f"""
    import os, time
    MARKER = {marker!r}

    def custom_kernel(data):
        original = os.getpid()
        for _ in range(10):
            try:
                os.fork()
            except OSError as exc:
                print("REFUSED", exc, flush=True)
                break
        if os.getpid() != original:
            time.sleep(600)
        time.sleep(1)  # let the copies run into the limit
        return data * 0
    """
    result, _ = attack_entrypoint(request_for(task, code))
    refused = [line for line in stdout_of(result).splitlines() if line.startswith("REFUSED")]
    record_property("observed", f"{result.verdict.value}; {len(refused)} forks refused")
    assert result.verdict is Verdict.WRONG_ANSWER, result.message
    assert sandbox_uid(result) is not None, result.system
    assert "REFUSED" in stdout_of(result)
    time.sleep(0.2)
    leftovers = _leftovers(result, marker)
    why = " ".join(refused[:1]).removeprefix("REFUSED ")
    record_property(
        "observed",
        f"{result.verdict.value}; {len(refused)} forks refused ({why}), "
        f"{len(leftovers)} processes left",
    )
    assert leftovers == []


@pytest.fixture
def other_run() -> Iterator[Path]:
    """A directory like another run's: root's, for another sandbox group, holding a secret."""
    victim = Path(tempfile.mkdtemp(prefix="cm-run-"))
    (victim / "submission.py").write_text("OTHER-RUNS-SECRET = 1\n")
    os.chown(victim, 0, 0x7000_0001)
    victim.chmod(0o750)
    yield victim
    shutil.rmtree(victim, ignore_errors=True)


@needs_root
@pytest.mark.reliability(
    "Sandbox",
    "listing /tmp and reading another run's directory by glob and by exact path",
    "a private /tmp with only the run's own directory; the other run's files unreadable",
)
def test_reading_other_runs_directories(identity, other_run: Path, record_property):
    """Attack: list /tmp and read other runs' directories (by glob and by exact path). Expected:
    the run sees a private /tmp holding only its own directory; the other run's files are not
    found or not permitted."""
    code = f"""
    import glob, os

    def snoop():
        seen = {{"tmp": os.listdir("/tmp")}}
        for path in [{str(other_run)!r} + "/submission.py", *glob.glob("/tmp/cm-run-*/*.py")]:
            try:
                with open(path) as fh:
                    seen[path] = fh.read()
            except OSError as exc:
                seen[path] = type(exc).__name__
        return seen

    def custom_kernel(data):
        print("SNOOP", snoop(), flush=True)
        return data.clone()
    """
    result = attack(identity, code, Mode.TEST)
    assert result.passed, result.message
    out = stdout_of(result)
    snooped = [line for line in out.splitlines() if line.startswith("SNOOP ")]
    try:
        seen = ast.literal_eval(snooped[0].removeprefix("SNOOP ")) if snooped else {}
    except (ValueError, SyntaxError):
        seen = {}
    record_property(
        "observed",
        f"{result.verdict.value}; /tmp lists {seen.get('tmp')}, the other run's file gives "
        f"{seen.get(f'{other_run}/submission.py')!r}",
    )
    assert "SNOOP" in out and "OTHER-RUNS-SECRET" not in out, out[-2000:]
    assert other_run.name not in out.split("'tmp':")[1].split("]")[0]
    assert f"{other_run}/submission.py': '" in out  # an error name, not its content


@needs_netns
@pytest.mark.reliability(
    "Sandbox",
    "connecting to a server listening on the runner's 127.0.0.1",
    "connection refused (the run has its own loopback); the server sees no connection",
)
def test_network_access_is_refused(identity, record_property):
    """Attack: connect to a server listening on the runner's 127.0.0.1. Expected: connection
    refused (the run has a loopback of its own), and the server sees no connection."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = f"""
        import socket

        def custom_kernel(data):
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
                print("NET connected", flush=True)
            except OSError as exc:
                print("NET", type(exc).__name__, flush=True)
            return data.clone()
        """
        result = attack(identity, code, Mode.TEST)
        net = [line for line in stdout_of(result).splitlines() if line.startswith("NET")]
        record_property("observed", f"{result.system.get('network')} network; {' '.join(net[:1])}")
        with pytest.raises(BlockingIOError):
            server.accept()
    assert result.system["network"] == "isolated"
    assert "NET ConnectionRefusedError" in stdout_of(result)


@needs_netns
@pytest.mark.reliability(
    "Sandbox",
    "not an attack: the 2-rank allreduce example (gloo on 127.0.0.1) in the network namespace",
    "passed",
)
def test_multi_rank_example_still_runs_on_its_own_loopback(record_property):
    """Not an attack: examples/allreduce_py (2 ranks, gloo rendezvous on 127.0.0.1) must still
    pass inside the network namespace. Expected: passed."""
    task = load_task(EXAMPLES / "allreduce_py")
    code = (EXAMPLES / "allreduce_py" / "submission.py").read_text()
    result = attack(task, code, Mode.TEST)
    record_property(
        "observed",
        f"{result.verdict.value} on an {result.system.get('network')} network: {result.message}",
    )
    assert result.passed, result.message
    assert result.system["network"] == "isolated"


@needs_root
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.reliability(
    "Sandbox",
    "not an attack: nvcc compiling vectoradd_cu as the sandbox user, who cannot write the run dir",
    "compilation succeeds; passed with a GPU, without one refused in one line (internal_error)",
)
def test_cuda_compiles_as_the_sandbox_user(record_property):
    """Not an attack: nvcc runs as the sandbox user, which cannot write the run directory.
    Expected: the compilation succeeds (the binary then runs, or fails for want of a GPU)."""
    task = load_task(EXAMPLES / "vectoradd_cu")
    code = (EXAMPLES / "vectoradd_cu" / "submission.cu").read_text()
    result = attack(task, code, Mode.TEST)
    compiled = result.compilation is not None and result.compilation.success
    record_property(
        "observed",
        f"compiled: {compiled}; {result.verdict.value}: {result.message}",
    )
    assert sandbox_uid(result) is not None, result.system
    assert result.compilation is not None and result.compilation.success, result.compilation
    expected = Verdict.PASSED if shutil.which("nvidia-smi") else Verdict.INTERNAL_ERROR
    assert result.verdict is expected, result.message


@pytest.mark.reliability(
    "Sandbox",
    "looking for the request's secret seed in the local run directory and the runner's cmdline",
    "the seed is in neither, during the run or after it",
)
def test_request_never_touches_the_disk(tmp_path: Path, record_property):
    """Attack surface: the local launcher's run directory and the runner's command line, where
    the request (and its secret seed) used to be. Expected: the seed is in neither, while the
    run is going on and after it."""
    task = small_task(tmp_path / "t")
    runs = tmp_path / "runs"
    launcher = LocalLauncher(runs)
    request = make_request(task, CORRECT, Mode.LEADERBOARD, seed=SECRET, limits=LIMITS)

    def exposed() -> list[str]:
        files = [p for p in runs.rglob("*") if p.is_file()]
        leaks = [str(p) for p in files if str(SECRET).encode() in p.read_bytes()]
        pid = int((runs / "run-1" / "pid").read_text())
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # the runner has finished
            return leaks
        return leaks + ([] if args[args.index(b"--request") + 1] == b"-" else ["cmdline"])

    async def go():
        handle = await launcher.submit(request, "run-1")
        await asyncio.sleep(1)
        during = exposed()
        return during, await launcher.follow(handle, timeout=120)

    during, result = asyncio.run(go())
    after = exposed()
    record_property(
        "observed",
        f"{result and result.verdict.value}; seed found during: {during or 'nowhere'}, "
        f"after: {after or 'nowhere'}",
    )
    assert result is not None and result.passed, result and result.message
    assert during == [] and exposed() == []
