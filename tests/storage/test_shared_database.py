"""The shared test database (tests/support/database.py): a reset brings back exactly what
migrating made (tables, seed rows, sequences), ends what a test left connected, and a changed
schema is caught."""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
import pytest

from cluster_manager.service import Service
from cluster_manager.storage.database import create_pool
from cluster_manager.storage.installation import installation_id
from tests.storage.helpers import board_with_submission, finish_submission
from tests.support import database

_TABLES = """
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname !~ '^pg_'
ORDER BY 1
"""


def contents(url: str) -> dict[str, Any]:
    """Everything a test could tell apart: the schema, every table's rows (yoyo's too), and
    where each sequence stands."""
    with psycopg.connect(url) as conn:
        tables = [name for (name,) in conn.execute(_TABLES)]
        rows = {
            name: conn.execute(f"SELECT json_agg(t ORDER BY t::text) FROM {name} AS t").fetchone()
            for name in tables
        }
        sequences = conn.execute(
            "SELECT sequencename, last_value FROM pg_sequences ORDER BY 1"
        ).fetchall()
        return {"schema": database.schema_fingerprint(conn), "rows": rows, "sequences": sequences}


def counts(state: dict[str, Any]) -> dict[str, int]:
    return {name: len(row[0] or []) for name, row in state["rows"].items()}


async def fill(url: str, service_registry: Any, clock: Any) -> None:
    """Rows in most tables, every sequence advanced, and the seed row changed."""
    pool = await create_pool(url, max_size=4)
    try:
        service = Service(pool, service_registry, clock=clock)
        _, receipt = await board_with_submission(service)
        await finish_submission(pool, receipt)
        await pool.execute("UPDATE installation SET id = 'changedbyatest'")
        for (sequence,) in await pool.fetch("SELECT sequencename FROM pg_sequences"):
            await pool.execute("SELECT nextval($1)", sequence)
    finally:
        await pool.close()


async def test_a_reset_database_equals_a_freshly_migrated_one(
    db_url, shared_database, pg_server, pg_template, registry, clock
):
    template = contents(database._with_database(pg_server, pg_template))
    assert contents(db_url) == template  # as the fixture hands it out

    await fill(db_url, registry, clock)
    dirty = contents(db_url)
    assert dirty != template
    assert sum(counts(dirty).values()) > sum(counts(template).values()) + 8

    shared_database.reset()
    # Row for row what the migrations left: seed rows (`installation`) and yoyo's included.
    assert contents(db_url) == template
    assert counts(template)["public.installation"] == 1

    # And what a database migrated anew holds: the same schema, tables, migrations, no
    # sequence used; only the installation's id, random per database, differs.
    name = database.create_template(pg_server, "anew")
    try:
        anew = contents(database._with_database(pg_server, name))
    finally:
        database.drop(pg_server, name)
    reset = contents(db_url)
    assert reset["schema"] == anew["schema"]
    assert counts(reset) == counts(anew)
    assert reset["sequences"] == anew["sequences"]
    assert all(last is None for _, last in reset["sequences"])

    def migration_ids(state: dict[str, Any]) -> list[str]:
        return sorted(row["migration_id"] for row in state["rows"]["public._yoyo_migration"][0])

    assert migration_ids(reset) == migration_ids(anew) != []
    with psycopg.connect(db_url) as conn:  # sequences restart: a first row gets id 1
        user = "INSERT INTO users (external_id, name) VALUES ('u', 'U') RETURNING id"
        assert conn.execute(user).fetchone() == (1,)


async def test_the_reset_ends_sessions_a_test_left_behind(db_url, shared_database):
    idle = psycopg.connect(db_url, autocommit=True)
    idle.execute("LISTEN left_behind")
    holding = psycopg.connect(db_url)  # a transaction left open, with locks and a row
    holding.execute("INSERT INTO users (external_id, name) VALUES ('held', 'Held')")
    holding.execute("LOCK TABLE leaderboards IN ACCESS EXCLUSIVE MODE")
    try:
        began = time.monotonic()
        shared_database.reset()
        assert time.monotonic() - began < 15  # never waited for the lock it would block on
        for conn in (idle, holding):
            with pytest.raises(psycopg.OperationalError):
                conn.execute("SELECT 1")
        with psycopg.connect(db_url) as conn:
            others = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
            assert others == (1,)  # the reset's own session
            assert conn.execute("SELECT count(*) FROM users").fetchone() == (0,)
    finally:
        idle.close()
        holding.close()


def test_seed_rows_and_sequences_of_any_table_are_put_back(fresh_db_url):
    """What migrations do not do today but might: seed rows with an identity and a generated
    column, a sequence no table owns, a serial advanced by the seeding."""
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute(
            """
            CREATE TABLE seeded (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                name TEXT NOT NULL,
                twice INTEGER GENERATED ALWAYS AS (length(name) * 2) STORED
            );
            INSERT INTO seeded (name) VALUES ('first'), ('second');
            CREATE TABLE counted (id BIGSERIAL PRIMARY KEY, seeded_id BIGINT REFERENCES seeded);
            CREATE SEQUENCE free_standing START 7;
            SELECT nextval('free_standing');
            """
        )
        reset = database.reset_sql(conn)
        migrated = contents(fresh_db_url)
        # The transaction that wrote the seed rows: a reset that puts them back writes anew.
        written = "SELECT array_agg(xmin::text ORDER BY id) FROM seeded"
        before = conn.execute(written).fetchone()

        conn.execute(reset)  # nothing changed: nothing is rewritten
        assert conn.execute(written).fetchone() == before
        assert contents(fresh_db_url) == migrated

        conn.execute(
            """
            INSERT INTO seeded (name) VALUES ('third');
            DELETE FROM seeded WHERE name = 'first';
            INSERT INTO counted (seeded_id) SELECT id FROM seeded;
            SELECT nextval('free_standing');
            UPDATE installation SET id = 'changedbyatest';
            """
        )
        assert contents(fresh_db_url) != migrated
        conn.execute(reset)
        assert conn.execute(written).fetchone() != before  # emptied, then seeded again
        assert contents(fresh_db_url) == migrated
        assert conn.execute("INSERT INTO seeded (name) VALUES ('x') RETURNING id").fetchone() == (
            3,
        )
        assert conn.execute("SELECT nextval('free_standing')").fetchone() == (8,)


async def test_a_changed_schema_is_caught_and_the_database_made_again(shared_database):
    shared_database.reset()
    with psycopg.connect(shared_database.url, autocommit=True) as conn:
        conn.execute("ALTER TABLE users ADD COLUMN extra TEXT")
    assert shared_database.schema_changed()
    old = shared_database.name
    shared_database.rebuild()
    assert shared_database.name != old
    assert not shared_database.schema_changed()
    with database._admin(shared_database.server) as admin:
        assert admin.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", (old,)
        ).fetchone() == (0,)
    pool = await create_pool(shared_database.url, max_size=1)
    try:
        assert await installation_id(pool)
    finally:
        await pool.close()


def test_test_databases_commit_without_waiting_and_no_other_is_changed(
    db_url, fresh_db_url, pg_server, pg_template
):
    for url in (db_url, fresh_db_url, database._with_database(pg_server, pg_template)):
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",), url
    with database._admin(pg_server) as admin:
        settings = admin.execute(
            "SELECT d.datname FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase"
            " WHERE array_to_string(s.setconfig, ',') LIKE '%synchronous_commit%'"
        ).fetchall()
        assert not {"postgres", "template1"} & {name for (name,) in settings}, settings
        if "DATABASE_URL" not in os.environ:  # a scratch server of the tests' own
            assert admin.execute("SHOW fsync").fetchone() == ("off",)
            assert admin.execute("SHOW full_page_writes").fetchone() == ("off",)
