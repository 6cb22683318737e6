"""A worker killed with SIGKILL while five jobs are in flight loses nothing: a new worker
re-attaches to the five runs, and each result is recorded exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from cluster_manager.core.gpus import default_registry
from cluster_manager.core.models import Mode
from cluster_manager.service import Service, Submitter
from tests.conftest import load_task, write_task

SLOW_KERNEL = """
import time

def custom_kernel(data):
    time.sleep(3)
    return data.clone()
"""


def start_worker(db_url: str, data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "CLUSTER_MANAGER_DATA_DIR": str(data_dir),
        "CLUSTER_MANAGER_LOCAL_CONCURRENCY": "5",
        # Released folders stay (marked): their count says how many runners were started.
        "CLUSTER_MANAGER_KEEP_RUN_FOLDERS_HOURS": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cluster_manager", "worker", "--lease", "2", "--poll", "0.2"],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def wait_for(pool, query: str, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (value := await pool.fetchval(query)) != expected:
        assert time.monotonic() < deadline, f"{query!r} is {value}, expected {expected}"
        await asyncio.sleep(0.2)


@pytest.mark.fresh_db("its worker processes may outlive it and would claim the next test's jobs")
@pytest.mark.reliability(
    "Faults",
    "the worker is killed (SIGKILL) with 5 jobs in flight, then a new worker starts",
    "it re-attaches to the 5 runs: each result recorded exactly once, nothing dispatched twice",
)
async def test_sigkill_with_five_jobs_in_flight_loses_nothing(
    pool, db_url, clock, tmp_path, record_property
):
    service = Service(pool, default_registry(5))
    task = load_task(write_task(tmp_path / "task", tests=[{"size": 8, "seed": 1}]))
    await service.leaderboards.create("durable", task, clock.now + timedelta(days=3650), ["CPU"])
    receipts = [
        await service.submissions.submit(
            "durable", Submitter(f"u{i}", f"u{i}"), "s.py", SLOW_KERNEL.encode(), mode=Mode.TEST
        )
        for i in range(5)
    ]
    data_dir, log = tmp_path / "data", tmp_path / "workers.log"
    first = start_worker(db_url, data_dir, log)
    try:
        await wait_for(pool, "SELECT count(*) FROM jobs WHERE state = 'dispatched'", 5, 60)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        # Nothing is finished yet: the kill landed while all five were running.
        assert await pool.fetchval("SELECT count(*) FROM runs") == 0

        second = start_worker(db_url, data_dir, log)
        try:
            await wait_for(pool, "SELECT count(*) FROM jobs WHERE state = 'finished'", 5, 120)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(20)
    finally:
        if first.poll() is None:
            first.kill()

    rows = await pool.fetch(
        "SELECT j.id, j.attempts, count(r.id) AS runs, bool_and(r.passed) AS passed "
        "FROM jobs j LEFT JOIN runs r ON r.job_id = j.id GROUP BY j.id ORDER BY j.id"
    )
    record_property(
        "observed",
        f"run rows per job {[r['runs'] for r in rows]}, attempts {[r['attempts'] for r in rows]}, "
        f"{len(list((data_dir / 'runs').iterdir()))} runner directories",
    )
    assert len(rows) == 5
    assert all(r["runs"] == 1 and r["passed"] for r in rows), log.read_text()[-3000:]
    assert all(r["attempts"] == 1 for r in rows)  # adopted, not dispatched again
    # One run directory per job: the local launcher never started a second runner; each
    # was released by the worker that recorded its result.
    folders = list((data_dir / "runs").iterdir())
    assert len(folders) == 5
    assert all((folder / "released").is_file() for folder in folders)
    for receipt in receipts:
        assert (await service.submissions.report(receipt.submission_id)).done
