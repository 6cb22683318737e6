"""Postgres restarted under load: a private server of this test's own (never the shared one) is
restarted with `pg_ctl restart -m fast` while clients submit and claim jobs through one pool."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import psutil
import pytest

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.database import DatabaseUnavailableError, create_pool
from cluster_manager.storage.migrations import apply_migrations
from tests.storage.helpers import kernel_code, make_board
from tests.support.fakes import FakeLauncher

pgserver = pytest.importorskip("pgserver")

CLIENTS = 8
# All an operation in flight may see while the server goes down and comes back: storage
# translates every lost, refused or dropped connection (asyncpg raises several kinds) into one.
OUTAGE_ERRORS = (DatabaseUnavailableError,)
REGISTRY = GpuRegistry({"CPU": GpuType("CPU", "local", max_concurrent=1_000_000)})


@pytest.fixture
def private_postgres() -> Iterator[Any]:
    """A Postgres of this test's own: pgserver's binaries, its unix socket in its data dir.

    Not under pytest's tmp_path: as root, pgserver runs Postgres as the `pgserver` user, which
    must traverse the parents of the data dir, and every pytest session that starts resets
    /tmp/pytest-of-root to 0700 (tests/support/database.py keeps its server out of there too)."""
    with tempfile.TemporaryDirectory(prefix="cm-test-pg-restart-") as tmp:
        server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            yield server
        finally:
            _stop(server)


def _stop(server: Any) -> None:
    try:
        # pgserver stops only the postmaster it started, and a restart replaced that one.
        with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
            pgserver.pg_ctl(
                ["-w", "-m", "fast", "stop"],
                pgdata=server.pgdata,
                user=server.system_user,
                timeout=60,
            )
    finally:
        # Its cleanup signals the postmaster it started, which the restart already replaced
        # (and the stop above ended): a process that is gone is what cleanup wants anyway.
        with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
            server.cleanup()


def restart(server: Any) -> None:
    """`pg_ctl restart -m fast`: every session is terminated, then the server starts again."""
    pgserver.pg_ctl(
        ["-w", "-t", "60", "-m", "fast", "restart"],
        pgdata=server.pgdata,
        user=server.system_user,
        timeout=90,
    )


async def backend_start(pool: asyncpg.Pool) -> Any:
    return await pool.fetchval("SELECT pg_postmaster_start_time()")


@pytest.mark.reliability(
    "Faults",
    f"Postgres restarted (pg_ctl restart -m fast) while {CLIENTS} clients submit and claim jobs",
    "the same pool serves again at once; no acknowledged submission or claim is lost or doubled",
)
async def test_postgres_restarted_under_load_the_pool_recovers(private_postgres, record_property):
    url = private_postgres.get_uri()
    await asyncio.to_thread(apply_migrations, url)  # as the app does for its embedded server
    pool = await create_pool(url, max_size=CLIENTS)
    try:
        service = Service(pool, REGISTRY)
        await make_board(service, rate_limit_per_hour=1_000_000)
        first_start = await backend_start(pool)

        submitted: list[int] = []  # acknowledged submissions
        claimed: list[tuple[int, str]] = []  # acknowledged claims: (job id, owner)
        failures: Counter[str] = Counter()
        failed_submits = 0
        late_failures: list[str] = []  # operations begun after the restart returned
        after_restart = [0] * CLIENTS  # successes per client begun after the restart returned
        restarted_at: float | None = None
        stop = asyncio.Event()

        async def client(n: int) -> None:
            nonlocal failed_submits
            owner = f"worker-{n}"
            for step in range(1_000_000):
                if stop.is_set():
                    return
                began = time.monotonic()
                try:
                    if step % 2 == 0:
                        receipt = await service.submissions.submit(
                            "board",
                            Submitter(f"user-{n}", f"User {n}"),
                            "submission.py",
                            kernel_code().encode(),
                            mode=Mode.TEST,
                        )
                        submitted.append(receipt.submission_id)
                    else:
                        jobs = await job_store.claim(
                            pool, owner=owner, gpu="CPU", max_active=10**6, lease_s=600, limit=2
                        )
                        claimed.extend((job.id, owner) for job in jobs)
                except OUTAGE_ERRORS as exc:
                    failures[type(exc).__name__] += 1
                    failed_submits += step % 2 == 0
                    if restarted_at is not None and began >= restarted_at:
                        late_failures.append(f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.05)
                    continue
                if restarted_at is not None and began >= restarted_at:
                    after_restart[n] += 1

        clients = [asyncio.create_task(client(n)) for n in range(CLIENTS)]
        try:
            deadline = time.monotonic() + 60
            while len(submitted) < 40 or len(claimed) < 20:  # under load before the restart
                assert time.monotonic() < deadline, "the load never got going"
                await asyncio.sleep(0.05)
            began = time.monotonic()
            await asyncio.to_thread(restart, private_postgres)
            restarted_at = time.monotonic()
            restart_s = restarted_at - began
            deadline = restarted_at + 30
            while min(after_restart) < 5:  # every client is served again
                assert time.monotonic() < deadline, (after_restart, failures, late_failures)
                await asyncio.sleep(0.05)
            recovered_s = time.monotonic() - restarted_at
        finally:
            stop.set()
            await asyncio.gather(*clients)

        assert await backend_start(pool) != first_start, "the server was not restarted"
        rows = await pool.fetch("SELECT id, submission_id, state, lease_owner FROM jobs")
        jobs_of = Counter(r["submission_id"] for r in rows)
        by_id = {r["id"]: r for r in rows}
        stored = {r["id"] for r in await pool.fetch("SELECT id FROM submissions")}
        record_property(
            "observed",
            f"restart took {restart_s:.1f} s; {sum(failures.values())} operations in flight failed "
            f"({', '.join(f'{n} {name}' for name, n in failures.most_common(3))}"
            f"{', …' if len(failures) > 3 else ''}), "
            f"{len(late_failures)} begun after it; all {CLIENTS} clients served again within "
            f"{recovered_s:.1f} s; {len(submitted)} submissions, {len(claimed)} claims, none lost",
        )
        # The same pool serves again, and did so for everything begun after the restart.
        assert await pool.fetchval("SELECT 1") == 1
        assert late_failures == []
        # Nothing acknowledged is lost or doubled.
        assert len(set(submitted)) == len(submitted)
        assert set(submitted) <= stored
        # Unacknowledged submits may or may not have committed, but never twice.
        assert len(stored) <= len(submitted) + failed_submits
        assert all(jobs_of[s] == 1 for s in stored), "a submission without exactly one job"
        claimed_ids = [job_id for job_id, _ in claimed]
        assert len(set(claimed_ids)) == len(claimed_ids), "a job was claimed twice"
        for job_id, owner in claimed:
            assert (by_id[job_id]["state"], by_id[job_id]["lease_owner"]) == ("claimed", owner)
    finally:
        await pool.close()


@pytest.mark.reliability(
    "Faults",
    "Postgres restarted while a scheduler drives jobs (its heartbeat, claims and results)",
    "the scheduler keeps serving; every job, before and after the restart, ends with one run",
)
async def test_a_scheduler_driving_jobs_survives_a_restart(private_postgres, record_property):
    url = private_postgres.get_uri()
    await asyncio.to_thread(apply_migrations, url)
    pool = await create_pool(url, max_size=6)
    registry = GpuRegistry({"CPU": GpuType("CPU", "fake", max_concurrent=4)})
    try:
        service = Service(pool, registry)
        await make_board(service, rate_limit_per_hour=1_000_000)

        async def submit_many(count: int, prefix: str) -> list[int]:
            ids = []
            for n in range(count):
                receipt = await service.submissions.submit(
                    "board",
                    Submitter(f"{prefix}-{n}", f"User {n}"),
                    "submission.py",
                    kernel_code().encode(),
                    mode=Mode.TEST,
                )
                ids.extend(job.id for job in receipt.jobs)
            return ids

        config = SchedulerConfig(lease_s=30, heartbeat_s=0.1, poll_s=0.1, max_attempts=5)
        scheduler = Scheduler(pool, registry, {"fake": FakeLauncher(polls=20)}, config=config)
        stop = asyncio.Event()
        serving = asyncio.create_task(scheduler.run(stop))
        try:
            before = await submit_many(12, "before")
            await asyncio.sleep(0.3)  # jobs in flight: claimed, dispatched, being followed
            await asyncio.to_thread(restart, private_postgres)
            after = await submit_many(6, "after")
            deadline = time.monotonic() + 60
            query = "SELECT count(*) FROM jobs WHERE state IN ('finished', 'failed')"
            while await pool.fetchval(query) < len(before) + len(after):
                assert not serving.done(), serving.exception()
                assert time.monotonic() < deadline, await pool.fetch("SELECT * FROM jobs")
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            await asyncio.wait_for(serving, 30)
        states = Counter(r["state"] for r in await pool.fetch("SELECT state FROM jobs"))
        attempts = Counter(r["attempts"] for r in await pool.fetch("SELECT attempts FROM jobs"))
        runs_per_job = await pool.fetch("SELECT job_id, count(*) AS n FROM runs GROUP BY job_id")
        most = max(r["n"] for r in runs_per_job)
        record_property(
            "observed",
            f"scheduler still serving; jobs {dict(states)}, attempts {dict(attempts)}; "
            f"{len(runs_per_job)} jobs with a run, at most {most} each",
        )
        # Jobs hit by the restart were resumed, not left to their leases and adopted.
        assert attempts == Counter({1: len(before) + len(after)})
        assert states == Counter({"finished": len(before) + len(after)})
        assert sorted(r["job_id"] for r in runs_per_job) == sorted(before + after)
        assert all(r["n"] == 1 for r in runs_per_job)
    finally:
        await pool.close()
