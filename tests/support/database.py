"""Test databases: one migrated template per test process, and from it

- one shared database per test process, which `db_url` empties back to its freshly migrated
  state before each test (every app table emptied, then the rows the migrations seeded);
- a fresh copy per test for `fresh_db_url`, dropped after it, for tests that need their own.

`DATABASE_URL` names the server (CI: the Postgres on 127.0.0.1:5432). Without it, an embedded
Postgres is started for the test session, as the project itself does.

Durability is off for test data only: every database made here commits without waiting for the
WAL flush, and the embedded server, a scratch one, runs without fsync. A server named by
`DATABASE_URL` keeps its own configuration.
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
from psycopg import sql

from cluster_manager.storage.migrations import apply_migrations
from cluster_manager.storage.runtime_dir import ensure_runtime_dir

# yoyo's bookkeeping (`_yoyo_migration`, `_yoyo_log`, `_yoyo_version`, `yoyo_lock`): a reset
# keeps it, so the shared database stays migrated.
_BOOKKEEPING = r"(c.relname LIKE '\_yoyo\_%' OR c.relname = 'yoyo_lock')"
_USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_'"

# The scratch server's data may be lost in a crash: it holds test data only.
_SCRATCH_SERVER_SETTINGS = {"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"}


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
            url = server.get_uri()
            _relax_scratch_server(url)
            yield url
        finally:
            server.cleanup()


def _relax_scratch_server(url: str) -> None:
    """pgserver takes no server options; these three need only a reload, not a restart."""
    with _admin(url) as conn:
        for name, value in _SCRATCH_SERVER_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")


def _no_commit_wait(conn: psycopg.Connection, name: str) -> None:
    """Commits in test database `name` return before the WAL is flushed (a crash of the
    server may lose the last ones; nothing else is at risk), for sessions opened from now on."""
    conn.execute(
        sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name))
    )


def create_template(url: str, worker: str) -> str:
    name = f"cm_template_{re.sub(r'[^a-z0-9]', '', worker.lower())}_{uuid.uuid4().hex[:8]}"
    with _admin(url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        _no_commit_wait(conn, name)
    apply_migrations(_with_database(url, name))
    return name


def create_copy(url: str, template: str, prefix: str = "cm_test") -> tuple[str, str]:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with _admin(url) as conn:
        # Database settings are not copied with the template.
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
        _no_commit_wait(conn, name)
    return name, _with_database(url, name)


def drop(url: str, name: str) -> None:
    with _admin(url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


# --- the shared database ---------------------------------------------------------------------

# Every other client session on the database goes, so nothing a previous test left behind (an
# unclosed pool, a subprocess) holds a lock the reset waits on, or writes after it.
_TERMINATE_OTHERS = """pg_terminate_backend(pid, 10000) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'"""

# A table's rows as text, to tell whether its seed rows are as the migrations left them.
_ROWS = sql.SQL("(SELECT json_agg(t)::text FROM {} AS t)")

# Where every sequence stands (last_value is null until the first nextval).
_SEQUENCES = """SELECT string_agg(format('%I.%I %s', schemaname, sequencename, last_value), ','
                  ORDER BY schemaname, sequencename) FROM pg_sequences"""

# What a test may not change in the shared database, since a reset does not restore it: schemas,
# relations, columns, constraints, indexes, triggers, functions, types and database settings,
# one line each (a column's place in its table left out: a migration's rollback cannot keep it).
_SCHEMA_ITEMS = f"""
    SELECT 'schema ' || n.nspname FROM pg_namespace n WHERE {_USER_SCHEMAS}
    UNION ALL
    SELECT format('relation %s.%s %s', n.nspname, c.relname, c.relkind)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_SCHEMAS}
    UNION ALL
    SELECT format('column %s.%s %s %s %s %s', n.nspname, c.relname, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE {_USER_SCHEMAS} AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('constraint %s %s %s', t.conrelid::regclass, t.conname,
                  pg_get_constraintdef(t.oid))
    FROM pg_constraint t JOIN pg_namespace n ON n.oid = t.connamespace WHERE {_USER_SCHEMAS}
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_SCHEMAS}
    UNION ALL
    SELECT format('trigger %s %s %s', t.tgrelid::regclass, t.tgname, t.tgenabled)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_SCHEMAS} AND NOT t.tgisinternal
    UNION ALL
    SELECT format('function %s.%s(%s) %s', n.nspname, p.proname,
                  pg_get_function_identity_arguments(p.oid), md5(p.prosrc))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {_USER_SCHEMAS}
    UNION ALL
    SELECT format('type %s.%s %s', n.nspname, t.typname, t.typtype)
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {_USER_SCHEMAS}
    UNION ALL
    SELECT 'setting ' || array_to_string(s.setconfig, ',')
    FROM pg_db_role_setting s JOIN pg_database db ON db.oid = s.setdatabase
    WHERE db.datname = current_database()
"""
_SCHEMA_FINGERPRINT = f"""
SELECT md5(string_agg(item, E'\\n' ORDER BY item)) FROM ({_SCHEMA_ITEMS}) AS schema(item)
"""


def app_tables(conn: psycopg.Connection) -> list[tuple[str, str]]:
    """(schema, table) of every table a test may fill: all but yoyo's bookkeeping."""
    rows = conn.execute(
        f"""
        SELECT n.nspname, c.relname FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND {_USER_SCHEMAS}
          AND NOT {_BOOKKEEPING}
        ORDER BY 1, 2
        """
    ).fetchall()
    return [(schema, table) for schema, table in rows]


def reset_sql(conn: psycopg.Connection) -> str:
    """A DO block that brings the database `conn` is on back to its contents of now (just after
    migrating): every app table emptied, its seed rows put back, every sequence where it stands.
    One statement, so a reset is one round trip and one transaction, skipped when the test
    changed nothing. Rows are deleted, not truncated: a test leaves a few rows, and TRUNCATE
    makes every table and index anew (new files), about 50 times as long. Foreign keys and
    triggers are off for the transaction (replica role), so the order does not matter."""
    tables = app_tables(conn)
    restore: list[sql.Composable] = [
        sql.SQL("PERFORM set_config('session_replication_role', 'replica', true)")
    ]
    restore += [sql.SQL("DELETE FROM {}").format(sql.Identifier(*table)) for table in tables]
    changed: list[sql.Composable] = []
    for schema, table in tables:
        seed = _seed_rows(conn, schema, table)
        if seed is None:
            changed.append(sql.SQL("EXISTS (SELECT FROM {})").format(sql.Identifier(schema, table)))
        else:
            rows, insert = seed
            restore.append(insert)
            changed.append(
                sql.SQL("{} IS DISTINCT FROM {}").format(
                    _ROWS.format(sql.Identifier(schema, table)), sql.Literal(rows)
                )
            )
    restore.extend(_sequence_states(conn))
    sequences = conn.execute(_SEQUENCES).fetchone()
    changed.append(
        sql.SQL("({}) IS DISTINCT FROM {}").format(
            sql.SQL(_SEQUENCES), sql.Literal(sequences[0] if sequences else None)
        )
    )
    block = sql.SQL(
        "DO $reset$ BEGIN\n"
        "PERFORM {terminate};\n"
        "IF {changed} THEN\n{restore};\nEND IF;\n"
        "END $reset$"
    ).format(
        terminate=sql.SQL(_TERMINATE_OTHERS),
        changed=sql.SQL("\n   OR ").join(changed),
        restore=sql.SQL(";\n").join(restore),
    )
    return block.as_string(conn)


def _seed_rows(
    conn: psycopg.Connection, schema: str, table: str
) -> tuple[str, sql.Composable] | None:
    """The rows the migrations left in the table (`installation`'s one row), as text, and the
    INSERT that puts them back; None for a table they left empty."""
    name = sql.Identifier(schema, table)
    found = conn.execute(sql.SQL("SELECT {}").format(_ROWS.format(name))).fetchone()
    if found is None or found[0] is None:
        return None
    rows = str(found[0])
    columns = [
        sql.Identifier(column)
        for (column,) in conn.execute(
            """
            SELECT attname FROM pg_attribute
            WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped
              AND attgenerated = ''
            ORDER BY attnum
            """,
            (name.as_string(conn),),
        )
    ]
    listed = sql.SQL(", ").join(columns)
    insert = sql.SQL(
        "INSERT INTO {table} ({columns}) OVERRIDING SYSTEM VALUE "
        "SELECT {columns} FROM json_populate_recordset(NULL::{table}, {rows}::json)"
    ).format(table=name, columns=listed, rows=sql.Literal(rows))
    return rows, insert


def _sequence_states(conn: psycopg.Connection) -> list[sql.Composable]:
    """setval for every sequence, back to where the migrations left it."""
    rows = conn.execute(
        "SELECT schemaname, sequencename, start_value, last_value FROM pg_sequences ORDER BY 1, 2"
    ).fetchall()
    statements: list[sql.Composable] = []
    for schema, sequence, start, last in rows:
        value, called = (start, False) if last is None else (last, True)
        statements.append(
            sql.SQL("PERFORM setval({}, {}, {})").format(
                sql.Literal(sql.Identifier(schema, sequence).as_string(conn)),
                sql.Literal(value),
                sql.Literal(called),
            )
        )
    return statements


def schema_items(conn: psycopg.Connection, *, bookkeeping: bool = True) -> list[str]:
    """What the fingerprint is made of, sorted: to compare two schemas and show the difference.
    `bookkeeping=False` leaves out yoyo's tables (they stay when every migration is undone)."""
    items = sorted(str(row[0]) for row in conn.execute(_SCHEMA_ITEMS))
    return [item for item in items if bookkeeping or not re.search(r"_yoyo_|yoyo_lock", item)]


def schema_fingerprint(conn: psycopg.Connection) -> str:
    row = conn.execute(_SCHEMA_FINGERPRINT).fetchone()
    assert row is not None
    return str(row[0])


class SharedDatabase:
    """One test process's database: copied once from the template, emptied before each test."""

    def __init__(self, server: str, template: str) -> None:
        self.server = server
        self.template = template
        self._conn: psycopg.Connection | None = None
        self._create()

    def _create(self) -> None:
        self.name, self.url = create_copy(self.server, self.template, prefix="cm_shared")
        conn = self._connection()
        self._reset = reset_sql(conn)
        self._fingerprint = schema_fingerprint(conn)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self.url, autocommit=True)
            # A session that outlives its termination fails the reset instead of hanging it.
            self._conn.execute("SET lock_timeout = '30s'")
        return self._conn

    def _execute(self, query: str) -> psycopg.Cursor:
        conn = self._connection()
        try:
            return conn.execute(query)
        except psycopg.OperationalError:
            if not conn.broken:
                raise
            # A test terminated every session on the database, this one's too.
            self._close()
            return self._connection().execute(query)

    def reset(self) -> None:
        """Back to the freshly migrated state: no other sessions, no rows but the seed rows,
        sequences where the migrations left them."""
        self._execute(self._reset)

    def schema_changed(self) -> bool:
        row = self._execute(_SCHEMA_FINGERPRINT).fetchone()
        return row is None or row[0] != self._fingerprint

    def rebuild(self) -> None:
        """A new copy of the template, for when a test changed the schema."""
        self.drop()
        self._create()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def drop(self) -> None:
        self._close()
        drop(self.server, self.name)
