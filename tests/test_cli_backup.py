"""`db backup` and `db restore` as operators run them: real processes, real Postgres."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from cluster_manager.app import open_app
from cluster_manager.settings import load_settings
from cluster_manager.storage.database import embedded_postgres
from cluster_manager.storage.migrations import migration_ids
from cluster_manager.storage.pg_tools import tool_folders, tools_for_server
from tests.support import database
from tests.support.cli import Cm, environment, run_cli
from tests.support.fast_task import FAST_SUBMISSION, FAST_TASK

FUTURE = "2099-01-01T00:00:00+00:00"


def cm_on(tmp_path: Path, env: dict[str, str]) -> Cm:
    """`cluster-manager` with `env` over this process's environment (never through an API)."""

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, env=environment(env), cwd=tmp_path, stdin=stdin)

    return run


def new_database(server: str) -> tuple[str, str]:
    """An empty database of the test's own on the server: (name, url)."""
    name = "cm_backup_" + os.urandom(4).hex()
    with database._admin(server) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, database._with_database(server, name)


def contents(url: str) -> dict[str, str]:
    """Every row of every table (yoyo's lock aside) and where every sequence stands, as text:
    equal contents mean nothing was lost, changed or added."""
    with psycopg.connect(url) as conn:
        tables = [t for t in database.app_tables(conn) if t[1] != "yoyo_lock"]
        tables += [("public", "_yoyo_migration")]
        found = {
            f"{schema}.{table}": str(
                conn.execute(
                    sql.SQL(
                        "SELECT coalesce(json_agg(t ORDER BY t::text), '[]')::text FROM {} t"
                    ).format(sql.Identifier(schema, table))
                ).fetchone()
            )
            for schema, table in tables
        }
        sequences = conn.execute(database._SEQUENCES).fetchone()
        found["sequences"] = str(sequences)
    return found


def create_quick(cm: Cm) -> None:
    made = cm(
        "leaderboard", "create", "quick", "--task", str(FAST_TASK), "--deadline", FUTURE,
        "--gpu", "CPU",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr


def queued_jobs(url: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT j.id, u.external_id, j.state FROM jobs j "
            "JOIN submissions s ON s.id = j.submission_id JOIN users u ON u.id = s.user_id "
            "WHERE j.state <> 'finished' ORDER BY j.id"
        ).fetchall()
    return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]


async def authenticate_and_run(env: dict[str, str], token: str, job_ids: set[int]) -> str:
    """Who `token` authenticates as on the database of `env`, once a scheduler there has run
    `job_ids` to their end."""
    async with open_app(load_settings({**os.environ, **env}, dotenv_path=None)) as app:
        user = await app.service.accounts.authenticate(token)
        await app.scheduler().run_until_idle(job_ids)
        return user.external_id


async def test_backup_drop_restore_keeps_everything(pg_server: str, tmp_path: Path):
    name, url = new_database(pg_server)
    env = {"DATABASE_URL": url, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")}
    cm = cm_on(tmp_path, env)
    try:
        assert cm("db", "migrate").returncode == 0
        create_quick(cm)
        ranked = cm("submit", "quick", str(FAST_SUBMISSION), "--user", "alice", "--mode", "ranked")
        assert ranked.returncode == 0 and "🏆 rank #1" in ranked.stdout, ranked.stderr
        team = cm("team", "create", "quick", "speedsters", "--user", "alice")
        assert team.returncode == 0, team.stderr
        token = cm("user", "token", "carol").stdout.splitlines()[0]
        pending = cm("submit", "quick", str(FAST_SUBMISSION), "--user", "bob", "--no-wait")
        assert pending.returncode == 0, pending.stderr
        ((job_id, _, _),) = queued_jobs(url)
        shown = {args: cm(*args).stdout for args in (("leaderboard", "list"), SHOW, TEAMS)}
        before = contents(url)

        backup = cm("db", "backup", "season.dump")
        assert backup.returncode == 0, backup.stderr
        assert f"schema at {migration_ids()[-1]}" in backup.stdout
        assert cm("db", "backup", "season.dump").returncode == 2  # never overwritten
        database.drop(pg_server, name)
        with database._admin(pg_server) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

        restored = cm("db", "restore", "season.dump")
        assert restored.returncode == 0, restored.stderr
        assert "the schema is up to date" in restored.stdout
        assert contents(url) == before  # every row, installation id and token hashes included
        assert {args: cm(*args).stdout for args in shown} == shown
        assert "alice" in shown[SHOW] and "#1" in shown[SHOW] and "speedsters" in shown[TEAMS]
        assert queued_jobs(url) == [(job_id, "bob", "queued")]

        assert await authenticate_and_run(env, token, {job_id}) == "carol"
        assert queued_jobs(url) == []
        with psycopg.connect(url) as conn:
            (verdict,) = conn.execute("SELECT verdict FROM runs WHERE job_id = %s", (job_id,))
        assert verdict == ("passed",)
    finally:
        database.drop(pg_server, name)


SHOW = ("leaderboard", "show", "quick")
TEAMS = ("team", "list", "quick")


def test_a_restore_never_overwrites_a_database_or_reads_garbage(
    pg_server: str, fresh_db_url: str, tmp_path: Path
):
    env = {"DATABASE_URL": fresh_db_url, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")}
    cm = cm_on(tmp_path, env)
    create_quick(cm)
    assert cm("db", "backup", "kept.dump").returncode == 0
    assert (
        cm("submit", "quick", str(FAST_SUBMISSION), "--user", "dave", "--no-wait").returncode == 0
    )
    before = contents(fresh_db_url)
    (tmp_path / "garbage.dump").write_bytes(b"PGDMP not really\n" * 20)

    refused = cm("db", "restore", "kept.dump")
    assert refused.returncode == 2
    assert "tables already (public._yoyo_log" in refused.stderr
    assert "give --replace" in refused.stderr and "Nothing was changed" in refused.stderr
    unanswered = cm("db", "restore", "kept.dump", "--replace", stdin="")
    assert unanswered.returncode == 2 and "not confirmed" in unanswered.stderr
    declined = cm("db", "restore", "kept.dump", "--replace", stdin="n\n")
    assert declined.returncode == 2 and "Drop the" in declined.stderr
    garbage = cm("db", "restore", "garbage.dump", "--replace", "--yes")
    assert garbage.returncode == 2
    assert "garbage.dump is not a backup that pg_restore can read" in garbage.stderr
    missing = cm("db", "restore", "nope.dump")
    assert missing.returncode == 2 and "there is no backup file nope.dump" in missing.stderr
    assert contents(fresh_db_url) == before

    # Asked and answered: the backup replaces the database (dave's later submission goes).
    replaced = cm("db", "restore", "kept.dump", "--replace", stdin="y\n")
    assert replaced.returncode == 0, replaced.stderr
    assert "replacing its" in replaced.stdout
    assert queued_jobs(fresh_db_url) == []
    with psycopg.connect(fresh_db_url) as conn:
        schemas = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname ~ '^public'")
        assert [row[0] for row in schemas] == ["public"]  # the old one set aside, then dropped


def test_a_backup_of_a_newer_schema_is_refused_before_anything_changes(
    pg_server: str, fresh_db_url: str, tmp_path: Path
):
    with psycopg.connect(fresh_db_url) as conn:  # as a later release would have migrated it
        conn.execute(
            "INSERT INTO _yoyo_migration (migration_hash, migration_id, applied_at_utc) "
            "VALUES ('f00d', '9999.from-the-future', now())"
        )
    env = {"DATABASE_URL": fresh_db_url, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")}
    assert cm_on(tmp_path, env)("db", "backup", "future.dump").returncode == 0
    name, url = new_database(pg_server)
    try:
        cm = cm_on(tmp_path, {**env, "DATABASE_URL": url})
        refused = cm("db", "restore", "future.dump")
        assert refused.returncode == 2
        assert "holds a schema newer than this release knows" in refused.stderr
        assert "9999.from-the-future" in refused.stderr
        with psycopg.connect(url) as conn:
            assert database.app_tables(conn) == []
    finally:
        database.drop(pg_server, name)


def test_the_password_reaches_pg_dump_and_pg_restore_only_by_their_environment(
    pg_server: str, tmp_path: Path
):
    """Through `--pg-bin`, pg_dump and pg_restore that write down how they were started, then
    run the real ones: the password is in their environment, never on their command line
    (where `ps` shows it to every user), and never in what the commands print."""
    name, url = new_database(pg_server)
    parts = urlsplit(url)
    address = f"{parts.username or 'postgres'}:s3cret-pw@{parts.hostname}:{parts.port or 5432}"
    with_password = urlunsplit(parts._replace(netloc=address))
    with psycopg.connect(url) as conn:
        major = conn.info.server_version // 10000
    record = tmp_path / "started.txt"
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for tool in ("pg_dump", "pg_restore"):
        real = tools_for_server(tool, major, tool_folders(None))[0].path
        wrapper = wrappers / tool
        wrapper.write_text(
            f'#!/bin/sh\necho "argv: $*" >> {record}\necho "env: $PGPASSWORD" >> {record}\n'
            f'exec {real} "$@"\n'
        )
        wrapper.chmod(0o755)
    env = {"DATABASE_URL": with_password, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")}
    cm = cm_on(tmp_path, env)
    try:
        assert cm("db", "migrate").returncode == 0
        done = cm("db", "backup", "own.dump", "--pg-bin", str(wrappers))
        assert done.returncode == 0, done.stderr
        refused = cm("db", "restore", "own.dump", "--pg-bin", str(wrappers))
        assert refused.returncode == 2 and "tables already" in refused.stderr
        printed = done.stdout + done.stderr + refused.stdout + refused.stderr
        assert "s3cret" not in printed and ":***@" in printed
        started = record.read_text().splitlines()
        argv = [line for line in started if line.startswith("argv: ")]
        assert any("--format=custom" in line for line in argv)  # pg_dump ran through it
        assert any("--list" in line for line in argv)  # and pg_restore read its backup
        assert all("s3cret" not in line for line in argv), argv
        assert "env: s3cret-pw" in started
    finally:
        database.drop(pg_server, name)


def test_the_embedded_database_backs_up_and_restores_into_a_new_data_dir(
    traversable_tmp: Path,
):
    embedded = {"DATABASE_URL": "", "CLUSTER_MANAGER_DATA_DIR": str(traversable_tmp / "old")}
    old = cm_on(traversable_tmp, embedded)
    create_quick(old)
    assert old("db", "backup", "embedded.dump").returncode == 0
    new = cm_on(
        traversable_tmp, {**embedded, "CLUSTER_MANAGER_DATA_DIR": str(traversable_tmp / "new")}
    )
    restored = new("db", "restore", "embedded.dump")
    assert restored.returncode == 0, restored.stderr
    assert "into the embedded database in" in restored.stdout
    assert "quick" in new("leaderboard", "list").stdout
    assert installation_of(traversable_tmp / "new") == installation_of(traversable_tmp / "old")


def installation_of(data_dir: Path) -> str:
    import asyncio

    async def read() -> str:
        async with embedded_postgres(data_dir / "postgres") as url:
            with psycopg.connect(url) as conn:
                return str(conn.execute("SELECT id, created_at FROM installation").fetchone())

    return asyncio.run(read())


def test_over_an_api_without_a_database_backup_and_restore_are_refused(tmp_path: Path):
    remote = {"CLUSTER_MANAGER_API_URL": "http://127.0.0.1:9", "DATABASE_URL": ""}
    cm = cm_on(tmp_path, {**remote, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")})
    for args in (("db", "backup", "x.dump"), ("db", "restore", "x.dump")):
        done = cm(*args)
        assert done.returncode == 2 and "never the server's through its API" in done.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "x.dump").exists()
