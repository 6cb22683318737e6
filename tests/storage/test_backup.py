"""storage.backup and storage.pg_tools: what a restore does when it cannot finish, and which
client programs it takes."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from cluster_manager.storage import backup as backup_module
from cluster_manager.storage.backup import BackupError, back_up, restore
from cluster_manager.storage.pg_tools import (
    PgTool,
    PgToolError,
    connection,
    tools_for_server,
)


def _rows(url: str) -> tuple[object, ...]:
    with psycopg.connect(url) as conn:
        return (
            conn.execute("SELECT id, created_at FROM installation").fetchall(),
            conn.execute("SELECT external_id FROM users ORDER BY 1").fetchall(),
            conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname ~ '^public' ORDER BY 1"
            ).fetchall(),
        )


def test_a_replace_whose_restore_fails_leaves_the_database_as_it_was(
    fresh_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    kept = back_up(fresh_db_url, tmp_path / "kept.dump")
    with psycopg.connect(fresh_db_url) as conn:
        conn.execute("INSERT INTO users (external_id, name) VALUES ('zoe', 'Zoe')")
    before = _rows(fresh_db_url)
    real_run = backup_module.run_tool

    def failing_restore(
        tool: PgTool, args: list[str], **kwargs: object
    ) -> subprocess.CompletedProcess[bytes]:
        if "--single-transaction" in args:  # the restore itself, after the schema was set aside
            return subprocess.CompletedProcess(args, 1, b"", b"pg_restore: error: disk full\n")
        return real_run(tool, args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(backup_module, "run_tool", failing_restore)
    with pytest.raises(BackupError, match=r"restored nothing; the database is as it was: .*full"):
        restore(fresh_db_url, kept.path, replace=True, confirm=lambda _question: True)
    assert _rows(fresh_db_url) == before
    assert before[1] == [("zoe",)] and before[2] == [("public",)]


def test_a_replace_is_refused_while_another_client_uses_the_database(
    fresh_db_url: str, tmp_path: Path
):
    kept = back_up(fresh_db_url, tmp_path / "kept.dump")
    asked: list[str] = []

    def confirm(question: str) -> bool:
        asked.append(question)
        return True

    other = psycopg.connect(fresh_db_url, application_name="cluster-manager worker")
    with other, pytest.raises(BackupError, match=r"1 other clients .*\(cluster-manager worker\)"):
        restore(fresh_db_url, kept.path, replace=True, confirm=confirm)
    assert asked == []  # refused before anyone is asked


def test_a_client_hanging_up_as_the_replace_begins_is_not_counted(fresh_db_url: str):
    """A command run just before (or this one's own earlier connection) stays listed until
    its server process exits; the check looks again rather than refuse."""
    leaving = psycopg.connect(fresh_db_url, application_name="cluster-manager cli")
    threading.Timer(0.5, leaving.close).start()
    began = time.monotonic()
    assert backup_module.other_sessions(fresh_db_url) == []
    assert 0.4 < time.monotonic() - began < backup_module.CLOSING_GRACE_S


def test_a_server_newer_than_every_pg_dump_is_refused_with_what_to_install(tmp_path: Path):
    old = tmp_path / "pg_dump"
    old.write_text("#!/bin/sh\necho 'pg_dump (PostgreSQL) 14.11'\n")
    old.chmod(0o755)
    with pytest.raises(PgToolError) as refused:
        tools_for_server("pg_dump", 16, [tmp_path])
    message = str(refused.value)
    assert "runs PostgreSQL 16 and no pg_dump here is that new" in message
    assert f"14.11 at {old}" in message and "postgresql-client-16" in message
    assert tools_for_server("pg_dump", 14, [tmp_path]) == [PgTool(old, 14, "14.11")]


def test_the_password_goes_to_the_environment_only():
    found = connection("postgresql://bob:s3cret@db.example:5433/season?sslmode=require")
    assert "s3cret" not in found.conninfo and "password" not in found.conninfo
    assert "host=db.example" in found.conninfo and "sslmode=require" in found.conninfo
    assert found.env == {"PGPASSWORD": "s3cret"}
    assert connection("postgresql://bob@db.example/season").env == {}
