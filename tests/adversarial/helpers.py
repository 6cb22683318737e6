"""Runs hostile submissions through the real runner, sandboxed as the entrypoint does."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from cluster_manager.core.models import Limits, Mode, RunRequest, Task, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.harness import runner
from tests.conftest import make_request, write_task
from tests.security.runners import run_entrypoint

NEGATE_REFERENCE = """
import torch

def generate_input(size, seed):
    gen = torch.Generator().manual_seed(seed % 2**64)
    return torch.randn(size, generator=gen)

def ref_kernel(data):
    return -data

def check_implementation(data, output):
    if not isinstance(output, torch.Tensor) or output.shape != data.shape:
        return "output has the wrong shape"
    if not torch.equal(output, -data):
        return f"mismatch: {int((output != -data).sum())} elements differ"
    return ""
"""

IDENTITY_REFERENCE = NEGATE_REFERENCE.replace("-data", "data")

# Start-up (Python, torch) gets its own allowance, ample for a busy machine: the ranked
# time budget stays short.
LIMITS = Limits(memory_bytes=8 << 30, grace=30)
SECRET = 918273645546372819


def failed_in(result: RunResult, phase: str) -> bool:
    """A wrong answer found in `phase` (the run stops at its first failing phase)."""
    return result.phases[-1].name == phase and result.verdict is Verdict.WRONG_ANSWER


def small_task(directory: Path, *, reference: str = IDENTITY_REFERENCE, **extra: object) -> Task:
    """Two tests and one benchmark, with a ranked phase of about two seconds."""
    spec = {"test_timeout": 20, "benchmark_timeout": 4, "ranked_timeout": 4, **extra}
    return load_task(write_task(directory, reference=reference, extra=spec))


def attack(
    task: Task,
    code: str,
    mode: Mode = Mode.LEADERBOARD,
    *,
    limits: Limits = LIMITS,
) -> RunResult:
    """Runs `code` as the submission in this process's runner, with the sandbox on."""
    request = make_request(task, textwrap.dedent(code), mode, seed=SECRET, limits=limits)
    return runner.run(request, isolate=True)


def attack_entrypoint(
    request: RunRequest, env: Mapping[str, str] | None = None
) -> tuple[RunResult, float]:
    """Through `python -m cluster_manager.harness.runner`: subreaper and SIGKILL-on-exit too."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cluster_manager.harness.runner", "--request", "-"],
        input=json.dumps(request.to_json()),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return RunResult.from_json(json.loads(done.stdout)), time.monotonic() - began


def request_for(task: Task, code: str, mode: Mode = Mode.LEADERBOARD, **kwargs) -> RunRequest:
    kwargs.setdefault("limits", LIMITS)
    return make_request(task, textwrap.dedent(code), mode, seed=SECRET, **kwargs)


def judged(task: Task, code: str, *, plain_user: bool) -> RunResult:
    """A ranked run of `code`, sandboxed: in this process as this user (root in CI), or
    through the runner's entrypoint as an ordinary user."""
    if not plain_user:
        return attack(task, code)
    request = request_for(task, code, Mode.LEADERBOARD)
    payload_dir = Path(tempfile.mkdtemp(prefix="cm-payload-"))  # where the user may read
    try:
        result, _, _ = run_entrypoint(request, plain_user=True, env={}, payload_dir=payload_dir)
    finally:
        shutil.rmtree(payload_dir, ignore_errors=True)
    return result


# A process that sleeps a moment and works a moment, over and over, as the jobs beside a run
# on a shared runner do: each wake preempts whatever spins on its CPU.
WAKER = """
import random, time
while True:
    time.sleep(random.random() * 0.002)
    end = time.perf_counter() + 0.0005
    while time.perf_counter() < end:
        pass
"""


@contextlib.contextmanager
def machine_loaded(wakers: int = 6) -> Iterator[None]:
    """Other work on the machine while the block runs, outside any sandbox."""
    load = [subprocess.Popen([sys.executable, "-c", WAKER]) for _ in range(wakers)]
    try:
        time.sleep(0.2)
        yield
    finally:
        for process in load:
            process.kill()
            process.wait()


def stdout_of(result: RunResult) -> str:
    return "\n".join(p.stdout for p in result.phases)


def sandbox_uid(result: RunResult) -> int | None:
    user = str(result.system.get("user", ""))
    return int(user.split()[1]) if user.startswith("uid ") else None


def processes_of(uid: int) -> list[int]:
    """Live (not zombie) processes whose real user id is `uid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            found.append(int(entry.name))
    return found


def not_ranked(result: RunResult) -> bool:
    """The run neither passed nor got a score."""
    return not result.passed and result.score is None


def ranked_at_least(result: RunResult, floor_s: float) -> bool:
    """Ranked no faster than `floor_s` (the work the kernel really does), or not ranked."""
    if not result.passed:
        return not_ranked(result)
    return result.score is not None and result.score >= floor_s
