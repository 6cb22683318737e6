"""The schema as it stands (`schema.sql`, written by `make schema`) is what the migrations make,
and every migration's rollback gives back the schema from before it, so that it can be
applied again."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator

import psycopg
import pytest
from yoyo import get_backend, read_migrations

from cluster_manager.data import MIGRATIONS_DIR
from cluster_manager.storage.migrations import migration_ids, yoyo_url
from tests.support import database
from tests.support.schema import SCHEMA_FILE, dump_schema, readable


def test_schema_sql_is_what_the_migrations_make(db_url: str):
    made = dump_schema(db_url)
    written = SCHEMA_FILE.read_text() if SCHEMA_FILE.is_file() else ""
    if made != written:
        diff = difflib.unified_diff(
            written.splitlines(), made.splitlines(), "schema.sql", "migrated", lineterm=""
        )
        pytest.fail(
            "schema.sql is not the schema the migrations make: run `make schema` and commit "
            "it\n" + "\n".join(diff),
            pytrace=False,
        )


def test_schema_sql_shows_each_table_with_what_belongs_to_it():
    sections = re.split(r"^-- (\w+) -+\n\n", SCHEMA_FILE.read_text(), flags=re.M)[1:]
    tables = dict(zip(sections[::2], sections[1::2], strict=True))
    assert {"users", "leaderboards", "submissions", "jobs", "runs", "rankings"} <= set(tables)
    for table, text in tables.items():
        assert text.startswith(f"CREATE TABLE public.{table} ("), table
        # Every constraint, default, index and sequence under a table's heading is its own.
        named = re.findall(r"(?:ALTER TABLE ONLY| ON| OWNED BY) public\.(\w+)", text)
        assert set(named) <= {table}, table
    assert "_yoyo" not in SCHEMA_FILE.read_text()


def test_readable_leaves_out_what_varies_between_runs_and_versions():
    dump = (
        "--\n-- PostgreSQL database dump\n--\n\n\\restrict abc123\n\n"
        "-- Dumped from database version 17.6\n-- Dumped by pg_dump version 17.6\n\n"
        "SET statement_timeout = 0;\n"
        "SELECT pg_catalog.set_config('search_path', '', false);\n\n"
        "--\n-- Name: t; Type: TABLE; Schema: public; Owner: -\n--\n\n"
        "CREATE TABLE public.t (\n    id bigint NOT NULL\n);\n\n\n"
        "--\n-- Name: t_id_idx; Type: INDEX; Schema: public; Owner: -\n--\n\n"
        "CREATE INDEX t_id_idx ON public.t USING btree (id);\n\n\n"
        "--\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict abc123\n\n"
    )
    text = readable(dump)
    assert not re.search(r"restrict|Dumped|SET |set_config|database dump", text)
    assert text.endswith(
        "CREATE TABLE public.t (\n    id bigint NOT NULL\n);\n\n"
        "CREATE INDEX t_id_idx ON public.t USING btree (id);\n"
    )


# --- rollbacks -------------------------------------------------------------------------------


@pytest.fixture
def empty_db_url(pg_server: str) -> Iterator[str]:
    """A database no migration touched yet."""
    name, url = database.create_copy(pg_server, "template0", prefix="cm_empty")
    yield url
    database.drop(pg_server, name)


def _difference(expected: list[str], found: list[str], label: str) -> str:
    lines = difflib.unified_diff(expected, found, "expected", label, lineterm="", n=0)
    return "\n".join(lines)


def test_every_rollback_gives_back_the_schema_before_its_migration(empty_db_url: str, db_url: str):
    """One database walked up the migrations: each applied, rolled back, applied again; at the
    top it has the schema of a database migrated in one go (`db_url`'s)."""
    backend = get_backend(yoyo_url(empty_db_url))
    walked: list[str] = []
    try:
        with psycopg.connect(empty_db_url, autocommit=True) as conn:
            before = database.schema_items(conn, bookkeeping=False)
            for migration in read_migrations(str(MIGRATIONS_DIR)):
                backend.apply_one(migration)
                after = database.schema_items(conn, bookkeeping=False)
                backend.rollback_one(migration)
                undone = database.schema_items(conn, bookkeeping=False)
                assert undone == before, (
                    f"rolling back {migration.id} does not give back the schema before it:\n"
                    + _difference(before, undone, "rolled back")
                )
                backend.apply_one(migration)
                again = database.schema_items(conn, bookkeeping=False)
                assert again == after, f"{migration.id} applied again:\n" + _difference(
                    after, again
                )
                walked.append(migration.id)
                before = after
    finally:
        backend.connection.close()
    assert walked == migration_ids()
    with psycopg.connect(db_url) as conn:
        assert before == database.schema_items(conn, bookkeeping=False)
