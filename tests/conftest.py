"""Shared helpers: tiny task folders written on the fly, and runs through the real runner."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
import yaml

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Limits, Mode, RunRequest, Task
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR
from cluster_manager.harness import runner
from cluster_manager.service import Service
from cluster_manager.storage.database import create_pool
from cluster_manager.telemetry.probes import ProbeFactory
from tests.support import database

pytest_plugins = [
    "pytester",
    "tests.support.reliability",
    "tests.support.fake_ncu",
    "tests.support.scheduling",
]

# Each benchmark case is timed for at most this long in the suite's runs, CLI processes
# included (`CLUSTER_MANAGER_BENCHMARK_CASE_S`): what is tested is the platform, not the
# figures; how close a timing gets is `make bench`'s (benchmarks/timing_error.py).
BENCHMARK_CASE_S = 0.5
os.environ.setdefault("CLUSTER_MANAGER_BENCHMARK_CASE_S", f"{BENCHMARK_CASE_S:g}")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = EXAMPLES_DIR
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A reference for a 1-D identity task: enough to exercise every path of the harness.
IDENTITY_REFERENCE = """
import torch

def generate_input(size, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=gen)

def ref_kernel(data):
    return data.clone()

def check_implementation(data, output):
    if not isinstance(output, torch.Tensor) or output.shape != data.shape:
        return "output has the wrong shape"
    if not torch.equal(output, data):
        return f"mismatch: {int((output != data).sum())} elements differ"
    return ""
"""

CORRECT = "def custom_kernel(data):\n    return data.clone()\n"


def write_task(
    directory: Path,
    *,
    reference: str = IDENTITY_REFERENCE,
    tests: list[dict] | None = None,
    benchmarks: list[dict] | None = None,
    extra: dict | None = None,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "reference.py").write_text(textwrap.dedent(reference))
    spec = {
        "files": [
            {"name": "submission.py", "source": "@SUBMISSION@"},
            {"name": "reference.py", "source": "reference.py"},
        ],
        "lang": "py",
        "tests": tests or [{"size": 8, "seed": 1}, {"size": 33, "seed": 2}],
        "benchmarks": benchmarks or [{"size": 256, "seed": 3}],
        "test_timeout": 30,
        "benchmark_timeout": 20,
        "ranked_timeout": 20,
        **(extra or {}),
    }
    (directory / "task.yml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return directory


def make_request(
    task: Task,
    code: str,
    mode: Mode = Mode.TEST,
    *,
    seed: int | None = None,
    limits: Limits | None = None,
) -> RunRequest:
    return RunRequest(
        task=task,
        submission_name=task.submission_name,
        submission_code=code,
        mode=mode,
        secret_seed=seed,
        limits=limits or Limits(memory_bytes=8 << 30),
    )


def run_code(
    task: Task,
    code: str,
    mode: Mode = Mode.TEST,
    *,
    gpu_probe: ProbeFactory | None = None,
    **kwargs,
) -> RunResult:
    """Runs through the real runner in this process (it still spawns the harness)."""
    request = make_request(task, textwrap.dedent(code), mode, **kwargs)
    return runner.run(request, gpu_probe=gpu_probe)


@pytest.fixture
def identity_task(tmp_path: Path) -> Task:
    return load_task(write_task(tmp_path / "identity"))


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


# --- databases -------------------------------------------------------------------------------


@pytest.fixture
def traversable_tmp() -> Iterator[Path]:
    """A temporary folder right in the system's one, for an embedded Postgres run as root:
    pgserver runs it as its own user, who must traverse every parent folder. pgserver opens
    them up, but under pytest's folder not for long: each new pytest session on the machine
    makes pytest-of-<user> private again, mid-initdb at times."""
    folder = Path(tempfile.mkdtemp(prefix="cm-test-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    with database.server_url() as url:
        yield url


@pytest.fixture(scope="session")
def pg_template(pg_server: str, worker_id: str) -> Iterator[str]:
    name = database.create_template(pg_server, worker_id)
    yield name
    database.drop(pg_server, name)


@pytest.fixture(scope="session")
def shared_database(pg_server: str, pg_template: str) -> Iterator[database.SharedDatabase]:
    shared = database.SharedDatabase(pg_server, pg_template)
    yield shared
    shared.drop()


@pytest.fixture
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """This test process's migrated database, emptied before each test (so a test that stopped
    half way leaves nothing behind) and shared by its tests one after another.

    A test that migrates, drops or alters the schema, hands the URL to a process that may
    outlive it, or needs the database to itself in another way takes `fresh_db_url`, or is
    marked `fresh_db` when it reaches the database through fixtures (pool, service, app)."""
    if request.node.get_closest_marker("fresh_db"):
        yield request.getfixturevalue("fresh_db_url")
        return
    shared: database.SharedDatabase = request.getfixturevalue("shared_database")
    shared.reset()
    yield shared.url
    if shared.schema_changed():
        shared.rebuild()  # for the tests after this one
        pytest.fail(
            "the test changed the schema of the shared database (db_url): give it fresh_db_url "
            "or mark it fresh_db",
            pytrace=False,
        )


@pytest.fixture
def fresh_db_url(pg_server: str, pg_template: str) -> Iterator[str]:
    """A freshly migrated database of the test's own, dropped after it."""
    name, url = database.create_copy(pg_server, pg_template)
    yield url
    database.drop(pg_server, name)


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(db_url, max_size=20)
    yield pool
    await pool.close()


class Clock:
    """A settable clock for deadlines and rate limits."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry() -> GpuRegistry:
    return GpuRegistry(
        {
            "CPU": GpuType("CPU", "local", max_concurrent=2, devices=2),
            "H100": GpuType("H100", "fake", max_concurrent=1),
        }
    )


@pytest.fixture
def service(pool: asyncpg.Pool, registry: GpuRegistry, clock: Clock) -> Service:
    return Service(pool, registry, clock=clock)
