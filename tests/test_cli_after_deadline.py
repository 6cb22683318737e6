"""Runs after the deadline through the CLI on a database: `leaderboard show --after-deadline`
prints their own ranking, titled so; `admin after-deadline NAME on|off` flips the organisers'
switch and says its new state."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.records import Placement
from cluster_manager.rendering.reports import format_placement
from cluster_manager.service import Service
from tests.conftest import EXAMPLES
from tests.storage.helpers import ALICE, BOB, finish_submission, make_board, submit
from tests.support.cli import environment, run_cli

BOARD = "board"


def cm(db_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`cluster-manager` on this test's database, never through an API."""
    ours = {"DATABASE_URL": db_url, "CLUSTER_MANAGER_DATA_DIR": str(cwd / "data")}
    return run_cli(*args, env=environment(ours), cwd=cwd, timeout=120)


@pytest.fixture
def service(pool: asyncpg.Pool, registry: GpuRegistry) -> Service:
    """On the wall clock, as the CLI's own service is."""
    return Service(pool, registry)


@pytest.fixture
async def ended(service: Service, pool: asyncpg.Pool) -> None:
    """Alice ranked in time at 5.0; the deadline passed an hour ago."""
    await make_board(service, deadline=datetime.now(UTC) + timedelta(days=1))
    await finish_submission(pool, await submit(service, user=ALICE), 5.0)
    await pool.execute("UPDATE leaderboards SET deadline = now() - interval '1 hour'")


async def test_show_after_the_deadline_prints_its_own_ranking(
    service: Service, pool: asyncpg.Pool, db_url: str, tmp_path: Path, ended: None
):
    empty = cm(db_url, tmp_path, "leaderboard", "show", BOARD, "--after-deadline")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.splitlines() == [
        f"{BOARD} — runs after the deadline",
        f"{BOARD} on CPU",
        "  no run after the deadline is ranked yet",
    ]
    receipt = await submit(service, user=BOB)
    assert receipt.after_deadline
    await finish_submission(pool, receipt, 1.0)

    shown = cm(db_url, tmp_path, "leaderboard", "show", BOARD, "--after-deadline")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{BOARD} — runs after the deadline\n")
    assert f"#1    {BOB.external_id}" in shown.stdout and ALICE.external_id not in shown.stdout
    competition = cm(db_url, tmp_path, "leaderboard", "show", BOARD)
    assert competition.stdout.startswith(f"{BOARD} on CPU\n")
    assert f"#1    {ALICE.external_id}" in competition.stdout
    assert BOB.external_id not in competition.stdout


async def test_admin_after_deadline_turns_runs_after_it_off_and_on(
    service: Service, db_url: str, tmp_path: Path, ended: None
):
    off = cm(db_url, tmp_path, "admin", "after-deadline", BOARD, "off")
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip() == f"{BOARD} takes no runs after its deadline"
    assert not (await service.leaderboards.get(BOARD)).after_deadline_runs
    status = cm(db_url, tmp_path, "admin", "status")
    assert f"⏰ {BOARD} takes no runs after its deadline (" in status.stdout, status.stderr
    on = cm(db_url, tmp_path, "admin", "after-deadline", BOARD, "on")
    assert on.stdout.strip() == f"{BOARD} takes runs after its deadline"
    assert (await service.leaderboards.get(BOARD)).after_deadline_runs
    status = cm(db_url, tmp_path, "admin", "status")
    assert "takes no runs after its deadline" not in status.stdout


def test_admin_after_deadline_takes_only_on_or_off(db_url: str, tmp_path: Path):
    wrong = cm(db_url, tmp_path, "admin", "after-deadline", BOARD, "maybe")
    assert wrong.returncode == 2 and "'maybe' is not one of 'on', 'off'" in wrong.stderr


async def test_submit_says_at_once_that_its_run_is_after_the_deadline(
    db_url: str, tmp_path: Path, ended: None
):
    solution = str(EXAMPLES / "identity_py" / "submission.py")
    args = ("submit", BOARD, solution, "--gpu", "CPU", "--mode", "test", "--no-wait")
    done = cm(db_url, tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert "(test mode) as " in done.stderr
    assert ", after the deadline (ranked among runs after it)" in done.stderr


def test_a_placement_after_the_deadline_names_its_ranking():
    late = Placement("CPU", 1, 1.0, improved=True, previous_best=None, after_deadline=True)
    assert format_placement(late).startswith("[CPU] 🏆 rank #1 among runs after the deadline with")
    stays = replace(late, improved=False, previous_best=0.5)
    assert format_placement(stays).endswith("at rank #1 among runs after the deadline")
    in_time = replace(late, after_deadline=False)
    assert "🏆 rank #1 with" in format_placement(in_time)
    assert "after the deadline" not in format_placement(in_time)
