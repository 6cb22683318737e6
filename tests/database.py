"""Test databases: one migrated template per test process, one fresh copy per test.

`DATABASE_URL` names the server (CI: the Postgres on 127.0.0.1:5432). Without it, an embedded
Postgres is started for the test session, as the project itself does.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from cluster_manager.storage.migrations import apply_migrations
from cluster_manager.storage.runtime_dir import ensure_runtime_dir


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(_with_database(url, "postgres"), autocommit=True)


@contextlib.contextmanager
def server_url() -> Iterator[str]:
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    ensure_runtime_dir()  # as the project does before it imports pgserver
    import pgserver

    with tempfile.TemporaryDirectory(prefix="cm-test-pg-") as tmp:
        server = pgserver.get_server(Path(tmp) / "pg", cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def create_template(url: str, worker: str) -> str:
    name = f"cm_template_{re.sub(r'[^a-z0-9]', '', worker.lower())}_{uuid.uuid4().hex[:8]}"
    with _admin(url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    apply_migrations(_with_database(url, name))
    return name


def create_copy(url: str, template: str) -> tuple[str, str]:
    name = f"cm_test_{uuid.uuid4().hex[:12]}"
    with _admin(url) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name, _with_database(url, name)


def drop(url: str, name: str) -> None:
    with _admin(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
