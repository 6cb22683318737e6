"""`schema.sql`: the schema the migrations make, as pg_dump writes it, one table after another
with its sequences, defaults, constraints, indexes, triggers and foreign keys.

It sits at the root of the repository to be read (in a review, beside a new migration), not
loaded: databases are made by the migrations, and it does not ship with the package, which
never reads it. `make schema` writes it (`python -m tests.support.schema`, on the server of
`DATABASE_URL` or an embedded one, as the tests do); tests/storage/test_schema.py holds it to
the migrations. What varies between runs and Postgres versions is left out (pg_dump's header
and session settings, the keys of `\\restrict`), and so is yoyo's own bookkeeping.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cluster_manager.storage.backup import server_major
from cluster_manager.storage.pg_tools import (
    connection,
    error_lines,
    run_tool,
    tool_folders,
    tools_for_server,
)

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.sql"

_YOYO_TABLES = ["public._yoyo_*", "public.yoyo_lock"]

_PREAMBLE = """\
-- The schema the migrations in src/cluster_manager/data/migrations/ make, as pg_dump writes it,
-- one table after another. Written by `make schema`; tests/storage/test_schema.py checks it.
-- It is for reading: a database is made by the migrations, never from this file.
"""

# pg_dump's comment before each object: `-- Name: jobs jobs_pkey; Type: CONSTRAINT; ...`.
_HEADER = re.compile(r"^--\n-- Name: (?P<name>.+?); Type: (?P<type>[^;]+);.*\n--\n", re.M)
# What differs between runs or versions and says nothing of the schema.
_NOISE = re.compile(
    r"^(--\n-- PostgreSQL database dump.*\n--|-- Dumped (from|by) .*|\\(un)?restrict .*|"
    r"SET .*|SELECT pg_catalog\.set_config\('search_path'.*)$",
    re.M,
)
_INDEXED_TABLE = re.compile(r" ON (?:ONLY )?(?:\w+\.)?(\w+) ")
_OWNED_BY = re.compile(r"OWNED BY (?:\w+\.)?(\w+)\.\w+;")


@dataclass(frozen=True)
class Entry:
    """One object of the dump: its name and type as pg_dump's comment gives them, its SQL."""

    name: str
    type: str
    sql: str


def entries(dump: str) -> list[Entry]:
    """The objects of a plain-format dump, in its order, each with its statement(s)."""
    found = list(_HEADER.finditer(dump))
    return [
        Entry(
            match["name"],
            match["type"],
            dump[match.end() : found[i + 1].start() if i + 1 < len(found) else len(dump)],
        )
        for i, match in enumerate(found)
    ]


def _without_noise(sql: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", _NOISE.sub("", sql)).strip()


def _owning_tables(found: Iterable[Entry]) -> dict[str, str]:
    """Each sequence that a column owns: the table of that column."""
    return {
        entry.name: match[1]
        for entry in found
        if entry.type == "SEQUENCE OWNED BY" and (match := _OWNED_BY.search(entry.sql))
    }


def _table_of(entry: Entry, sequences: dict[str, str]) -> str | None:
    """The table an object belongs to, or None for one of its own (a type, a function)."""
    if entry.type == "TABLE":
        return entry.name
    if entry.type in ("SEQUENCE", "SEQUENCE OWNED BY"):
        return sequences.get(entry.name)
    if entry.type == "INDEX":
        match = _INDEXED_TABLE.search(entry.sql)
        return match[1] if match else None
    if entry.type in ("DEFAULT", "CONSTRAINT", "FK CONSTRAINT", "TRIGGER"):
        return entry.name.split(" ", 1)[0]
    return None


def readable(dump: str) -> str:
    """A plain `--schema-only` dump, its noise left out and its objects grouped by table:
    the objects of no table first (pg_dump's comment kept to name them), then each table, in
    pg_dump's order (by name), with what belongs to it in pg_dump's order (sequences,
    defaults, constraints, indexes, triggers, foreign keys)."""
    found = entries(dump)
    sequences = _owning_tables(found)
    loose: list[str] = []
    tables: dict[str, list[str]] = {}
    for entry in found:
        sql = _without_noise(entry.sql)
        if not sql:
            continue
        table = _table_of(entry, sequences)
        if table is None:
            loose.append(f"-- {entry.type} {entry.name}\n{sql}")
        else:
            tables.setdefault(table, []).append(sql)
    sections = [_PREAMBLE.rstrip(), *loose]
    sections += [
        f"-- {table} {'-' * (96 - len(table) - 4)}\n\n" + "\n\n".join(parts)
        for table, parts in tables.items()
    ]
    return "\n\n\n".join(sections) + "\n"


def dump_schema(url: str) -> str:
    """The database's schema as `readable` writes it, dumped with the pg_dump that suits its
    server (pg_tools: the embedded Postgres's, Debian's, or the one on PATH)."""
    pg_dump = tools_for_server("pg_dump", server_major(url), tool_folders(None))[0]
    args = ["--schema-only", "--no-owner", "--no-privileges"]
    args += [f"--exclude-table={pattern}" for pattern in _YOYO_TABLES]
    done = run_tool(pg_dump, args, database=connection(url))
    if done.returncode != 0:
        raise RuntimeError(f"pg_dump ({pg_dump.describe()}) failed: {error_lines(done)}")
    return readable(done.stdout.decode())


def main() -> None:
    """Writes schema.sql from a database made by the migrations and dropped afterwards."""
    from tests.support import database

    with database.server_url() as server:
        name = database.create_template(server, f"schema{uuid.uuid4().hex[:6]}")
        try:
            text = dump_schema(database._with_database(server, name))
        finally:
            database.drop(server, name)
    changed = not SCHEMA_FILE.is_file() or SCHEMA_FILE.read_text() != text
    SCHEMA_FILE.write_text(text)
    print(f"{SCHEMA_FILE.name}: {'written' if changed else 'unchanged'}", file=sys.stderr)


if __name__ == "__main__":
    main()
