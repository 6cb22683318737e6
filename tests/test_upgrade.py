"""An upgrade as an operator makes it: the database is at the previous release's schema with
jobs in flight, and the new release's `db migrate` runs while a worker of the old code serves
the queue; then the old worker gives way to a new one. Nothing may be lost or run twice.

The previous release is the code as it was just before the newest migration was added, taken
from the repository's history (`git archive`), so the test needs a clone with its history."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from cluster_manager.storage.migrations import migration_ids
from tests.support import database
from tests.support.cli import Cm, environment, run_cli
from tests.support.fast_task import FAST_SUBMISSION, FAST_TASK

REPO = Path(__file__).resolve().parents[1]
MIGRATIONS = "src/cluster_manager/data/migrations"
FUTURE = "2099-01-01T00:00:00+00:00"


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(
            f"`git {' '.join(args)}` failed in {REPO}: {done.stderr.strip()}. The upgrade test "
            "needs the repository's history: run it in a git clone with its full history "
            "(on GitHub Actions, actions/checkout with fetch-depth: 0)"
        )
    return done.stdout.strip()


def previous_release(into: Path) -> Path:
    """The `src/` of the commit before the one that added the newest migration."""
    newest = f"{MIGRATIONS}/{migration_ids()[-1]}.sql"
    added = git("log", "--diff-filter=A", "--format=%H", "--", newest).splitlines()
    if not added:
        pytest.fail(
            f"git knows no commit that added {newest}: commit it, or, in a clone without the "
            "repository's history (an archive, a shallow clone), fetch it (on GitHub Actions, "
            "actions/checkout with fetch-depth: 0): the upgrade test needs it"
        )
    into.mkdir()
    archive = subprocess.Popen(
        ["git", "archive", "--format=tar", f"{added[0]}^", "src"],
        cwd=REPO,
        stdout=subprocess.PIPE,
    )
    extracted = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, timeout=60)
    assert archive.wait(timeout=60) == 0 and extracted.returncode == 0
    assert not (into / newest).exists() and (into / MIGRATIONS).is_dir()
    return into / "src"


def new_database(server: str) -> tuple[str, str]:
    name = "cm_upgrade_" + os.urandom(4).hex()
    with database._admin(server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, database._with_database(server, name)


def cm_with(code: Path, env: dict[str, str], cwd: Path) -> Cm:
    """`cluster-manager` of the code in `code` (a `src` folder) on the database of `env`."""
    ours = {**env, "PYTHONPATH": str(code)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, env=environment(ours), cwd=cwd, timeout=120)

    return run


@contextmanager
def worker(code: Path, env: dict[str, str], cwd: Path, log: Path) -> Iterator[None]:
    """`cluster-manager worker` of the code in `code`, stopped as an operator stops it."""
    base = {k: v for k, v in os.environ.items() if k != "CLUSTER_MANAGER_API_URL"}
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "cluster_manager", "worker", "--poll", "0.2"],
            env={**base, **env, "PYTHONPATH": str(code)},
            cwd=cwd,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            yield
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            finally:
                process.kill()
    assert process.returncode == 0, log.read_text()[-3000:]


def job_states(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT state FROM jobs ORDER BY id")]


def wait_until(url: str, done: Callable[[list[str]], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not done(states := job_states(url)):
        assert time.monotonic() < deadline, f"never {what}: jobs {states}"
        time.sleep(0.1)


def all_finished(states: list[str]) -> bool:
    return all(state in ("finished", "failed") for state in states)


def submit(cm: Cm, user: str, source: Path, mode: str = "leaderboard") -> None:
    done = cm("submit", "quick", str(source), "--user", user, "--mode", mode, "--no-wait")
    assert done.returncode == 0, done.stderr


def test_migrating_under_a_running_old_worker_loses_and_repeats_nothing(
    pg_server: str, tmp_path: Path
):
    old_code = previous_release(tmp_path / "previous-release")  # out of coverage: pyproject
    new_code = REPO / "src"
    name, url = new_database(pg_server)
    env = {
        "DATABASE_URL": url,
        "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data"),
        # Two jobs at a time: the others wait in the queue while the migration runs.
        "CLUSTER_MANAGER_LOCAL_CONCURRENCY": "2",
    }
    old, new = cm_with(old_code, env, tmp_path), cm_with(new_code, env, tmp_path)
    slow = tmp_path / "slow.py"  # a correct kernel that keeps its job in flight a moment
    slow.write_text("import time\ntime.sleep(1)\n" + FAST_SUBMISSION.read_text())
    newest = migration_ids()[-1]
    try:
        migrated_by_old = old("db", "migrate")
        assert migrated_by_old.returncode == 0, migrated_by_old.stderr
        assert newest not in migrated_by_old.stdout
        created = old(
            "leaderboard", "create", "quick", "--task", str(FAST_TASK), "--deadline", FUTURE,
            "--gpu", "CPU",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        for user in ("ann", "ben", "cid"):  # ranked: a public run and a secret re-run each
            submit(old, user, slow)
        submit(old, "dee", slow, mode="test")

        with worker(old_code, env, tmp_path, tmp_path / "old-worker.log"):
            wait_until(
                url,
                lambda s: "queued" in s and any(x in ("claimed", "dispatched") for x in s),
                "some jobs in flight and others queued",
            )
            migrated = new("db", "migrate")
            after_migration = job_states(url)
            assert migrated.returncode == 0, migrated.stderr
            assert migrated.stdout.strip() == f"applied: {newest}"
            # The old code on the new schema: its worker goes on (the queued jobs, and a job
            # its CLI submits now), its reads still work. A migration that is not additive
            # (a column or table the old code uses, dropped or renamed) fails here.
            submit(old, "eve", slow)
            wait_until(url, all_finished, "all finished by the old worker")
            shown = old("leaderboard", "show", "quick")
            assert shown.returncode == 0, shown.stderr
        # The old worker gives way to a new one, which serves what the new CLI submits.
        with worker(new_code, env, tmp_path, tmp_path / "new-worker.log"):
            submit(new, "fay", slow)
            wait_until(url, all_finished, "all finished by the new worker")

        # The migration ended before the jobs it found in flight or queued did: the old worker
        # finished them on the new schema (and eve's, submitted after it, for certain).
        assert not all_finished(after_migration), after_migration
        with psycopg.connect(url) as conn:
            jobs = conn.execute(
                "SELECT u.external_id, j.mode, j.secret, j.state, j.attempts, r.verdict, r.score"
                " FROM jobs j JOIN submissions s ON s.id = j.submission_id"
                " JOIN users u ON u.id = s.user_id LEFT JOIN runs r ON r.job_id = j.id"
                " ORDER BY j.id"
            ).fetchall()
            ranked = dict(
                conn.execute(
                    "SELECT u.external_id, k.score FROM rankings k JOIN users u ON u.id = k.user_id"
                ).fetchall()
            )
        users = ["ann", "ben", "cid", "eve", "fay"]
        expected = [(u, "leaderboard", secret) for u in users for secret in (False, True)]
        expected.append(("dee", "test", False))
        assert sorted((u, mode, secret) for u, mode, secret, *_ in jobs) == sorted(expected)
        # Every job finished once (one claim, one run), and passed.
        assert {(state, attempts, verdict) for _, _, _, state, attempts, verdict, _ in jobs} == {
            ("finished", 1, "passed")
        }, jobs
        # Each ranked submission ranks with the slower of its public and secret runs.
        pairs: dict[str, list[float]] = {}
        for user, mode, _secret, *_, score in jobs:
            if mode == "leaderboard":
                pairs.setdefault(user, []).append(score)
        assert ranked == {user: max(scores) for user, scores in pairs.items()}
        board = new("leaderboard", "show", "quick")
        assert board.returncode == 0 and all(u in board.stdout for u in users), board.stdout
    finally:
        database.drop(pg_server, name)
