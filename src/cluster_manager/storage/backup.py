"""Backups of the whole database with pg_dump (custom format) and their restore with
pg_restore, then the migrations a backup of an older schema lacks.

A restore goes into an empty database, or replaces one only when asked to; everything that
could refuse it (an unreadable file, a schema newer than this code, a database in use) is
checked before the database is changed. pg_restore runs in one transaction and a replaced
schema is kept aside until it succeeded, so a failed restore leaves the database as it was."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from cluster_manager.storage.database import unreachable
from cluster_manager.storage.migrations import apply_migrations, migration_ids
from cluster_manager.storage.pg_tools import (
    PgTool,
    PgToolError,
    connection,
    error_lines,
    run_tool,
    tool_folders,
    tools_for_server,
)

# yoyo's bookkeeping: which migrations the schema holds, and its lock (held only while a
# migration runs, so its rows are never worth keeping).
MIGRATIONS_TABLE = "_yoyo_migration"
LOCK_TABLE = "yoyo_lock"
# What a backup of this project must hold; the installation id cannot be made again.
REQUIRED_TABLES = (MIGRATIONS_TABLE, "installation")

_USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_'"
_TOC_TABLE = re.compile(r"^\d+;\s+\d+\s+\d+\s+(TABLE DATA|TABLE)\s+(\S+)\s+(\S+)", re.M)
_TOC_SERVER = re.compile(r"^;\s+Dumped from database version:\s*(.+)$", re.M)


class BackupError(PgToolError):
    """A backup or restore refused or failed; the message says why and what was left."""


@dataclass(frozen=True)
class Backup:
    path: Path
    # The schema's migrations, as yoyo recorded them in the database that was backed up.
    migrations: list[str]
    tables: int
    server_version: str


@dataclass(frozen=True)
class Restored:
    backup: Backup
    # Migrations applied after the restore, to bring an older backup's schema up to date.
    migrated: list[str]
    # Tables dropped first (`replace`); 0 for a restore into an empty database.
    replaced_tables: int


# --- the database ----------------------------------------------------------------------------


def _connect(url: str) -> psycopg.Connection[TupleRow]:
    try:
        return psycopg.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise unreachable("cannot connect to the database", exc) from exc


def server_major(url: str) -> int:
    with _connect(url) as conn:
        return conn.info.server_version // 10000


def user_tables(url: str) -> list[str]:
    """Every table outside Postgres's own schemas, as `schema.table`."""
    with _connect(url) as conn:
        rows = conn.execute(
            f"""SELECT n.nspname || '.' || c.relname FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p') AND {_USER_SCHEMAS} ORDER BY 1"""
        ).fetchall()
    return [row[0] for row in rows]


# A client that has just hung up (this command's own earlier connection, or the command run
# before it) stays listed until its server process has exited, a moment later: the check
# looks again for this long before it calls the clients connected.
CLOSING_GRACE_S = 3.0


def other_sessions(url: str) -> list[str]:
    """The clients connected to the database besides us, by application name, once those
    that are hanging up have gone."""
    still_connected = Retrying(
        stop=stop_after_delay(CLOSING_GRACE_S),
        wait=wait_fixed(0.1),
        retry=retry_if_result(bool),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else [],
    )
    return still_connected(_sessions_now, url)


def _sessions_now(url: str) -> list[str]:
    with _connect(url) as conn:
        rows = conn.execute(
            """SELECT coalesce(nullif(application_name, ''), 'a client') FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND backend_type = 'client backend'"""
        ).fetchall()
    return [row[0] for row in rows]


def _set_aside_public_schema(url: str) -> str:
    """Renames the public schema (with everything in it) and makes a new, empty one: the
    restore goes there, and the old one is dropped only once it succeeded."""
    aside = f"public_before_restore_{secrets.token_hex(4)}"
    with _connect(url) as conn, conn.transaction():
        conn.execute(sql.SQL("ALTER SCHEMA public RENAME TO {}").format(sql.Identifier(aside)))
        conn.execute("CREATE SCHEMA public")
    return aside


def _put_back_public_schema(url: str, aside: str) -> None:
    with _connect(url) as conn, conn.transaction():
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute(sql.SQL("ALTER SCHEMA {} RENAME TO public").format(sql.Identifier(aside)))


def _drop_schema(url: str, name: str) -> None:
    with _connect(url) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def _missing_tables(url: str) -> list[str]:
    with _connect(url) as conn:
        found = conn.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relname = ANY(%s)""",
            (list(REQUIRED_TABLES),),
        ).fetchall()
    return sorted(set(REQUIRED_TABLES) - {row[0] for row in found})


# --- backup ----------------------------------------------------------------------------------


def back_up(url: str, target: Path, *, pg_bin: Path | None = None) -> Backup:
    """Writes the database at `url` to `target` with pg_dump's custom format (one consistent
    snapshot: the platform may keep running), read back before it takes the name `target`."""
    if target.exists():
        raise BackupError(f"{target} exists already: name a new file (a backup never overwrites)")
    if not target.parent.is_dir():
        raise BackupError(f"there is no folder {target.parent} to write {target.name} into")
    if missing := _missing_tables(url):
        raise BackupError(
            f"the database holds no cluster-manager schema (no {', '.join(missing)} table): "
            "nothing to back up; is DATABASE_URL the right database?"
        )
    major = server_major(url)
    folders = tool_folders(pg_bin)
    pg_dump = tools_for_server("pg_dump", major, folders)[0]
    partial = target.with_name(target.name + ".partial")
    try:
        done = run_tool(
            pg_dump,
            ["--format=custom", f"--exclude-table-data={LOCK_TABLE}", f"--file={partial}"],
            database=connection(url),
        )
        if done.returncode != 0:
            raise BackupError(f"pg_dump ({pg_dump.describe()}) failed: {error_lines(done)}")
        written = read_backup(partial, tools_for_server("pg_restore", pg_dump.major, folders))[0]
        partial.replace(target)  # never a half-written file under the real name
    finally:
        partial.unlink(missing_ok=True)
    return Backup(target, written.migrations, written.tables, written.server_version)


# --- reading a backup ------------------------------------------------------------------------


def read_backup(path: Path, pg_restores: list[PgTool]) -> tuple[Backup, PgTool]:
    """What the backup at `path` holds, and the first of `pg_restores` that reads it; refused
    when it is not a pg_dump archive of this project's database."""
    if not path.is_file():
        raise BackupError(f"there is no backup file {path}")
    failure = ""
    for tool in pg_restores:
        listed = run_tool(tool, ["--list", str(path)])
        if listed.returncode == 0:
            return _backup_of(path, tool, listed.stdout.decode("utf-8", "replace")), tool
        failure = error_lines(listed, limit=1)
    raise BackupError(
        f"{path} is not a backup that pg_restore can read ({failure}); "
        "a backup is what `cluster-manager db backup` writes"
    )


def _backup_of(path: Path, tool: PgTool, toc: str) -> Backup:
    tables = {(kind, name) for kind, schema, name in _TOC_TABLE.findall(toc) if schema == "public"}
    missing = [name for name in REQUIRED_TABLES if ("TABLE DATA", name) not in tables]
    if missing:
        raise BackupError(
            f"{path} is a Postgres backup, but not of a cluster-manager database "
            f"(it holds no {', '.join(missing)} table)"
        )
    server = _TOC_SERVER.search(toc)
    return Backup(
        path,
        _recorded_migrations(path, tool),
        sum(1 for kind, _name in tables if kind == "TABLE"),
        server.group(1).strip() if server else "unknown",
    )


def _recorded_migrations(path: Path, tool: PgTool) -> list[str]:
    """The migration ids in the backup's copy of yoyo's table, read without a database."""
    done = run_tool(tool, ["--data-only", f"--table={MIGRATIONS_TABLE}", "--file=-", str(path)])
    if done.returncode != 0:
        raise BackupError(f"cannot read the migrations in {path}: {error_lines(done)}")
    lines = iter(done.stdout.decode("utf-8", "replace").splitlines())
    for line in lines:
        if line.startswith("COPY ") and MIGRATIONS_TABLE in line:
            columns = [c.strip() for c in line.split("(", 1)[1].split(")", 1)[0].split(",")]
            at = columns.index("migration_id")
            ids = sorted(row.split("\t")[at] for row in _until_end_of_copy(lines))
            if ids:
                return ids
    raise BackupError(f"{path} holds no rows of {MIGRATIONS_TABLE}: it cannot be restored")


def _until_end_of_copy(lines: Iterator[str]) -> list[str]:
    rows: list[str] = []
    for line in lines:
        if line == "\\.":
            return rows
        rows.append(line)
    return rows


# --- restore ---------------------------------------------------------------------------------


def restore(
    url: str,
    source: Path,
    *,
    replace: bool = False,
    confirm: Callable[[str], bool] = lambda _question: False,
    pg_bin: Path | None = None,
) -> Restored:
    """Restores `source` into the database at `url`, then applies the migrations it lacks.

    The database must hold no table; with `replace`, once `confirm` (given what would be
    lost) says yes, its public schema is set aside, and dropped once the restore succeeded.
    Refused, with the database as it was, when the backup cannot be read, holds a schema
    newer than this code, or the database is in use or holds tables outside the public
    schema."""
    pg_restores = tools_for_server("pg_restore", server_major(url), tool_folders(pg_bin))
    backup, pg_restore = read_backup(source, pg_restores)
    known = set(migration_ids())
    if newer := [m for m in backup.migrations if m not in known]:
        raise BackupError(
            f"{source} holds a schema newer than this release knows (migrations "
            f"{', '.join(newer)}): restore it with the release that made it, or a newer one. "
            "Nothing was changed"
        )
    tables = user_tables(url)
    aside = None
    if tables:
        _may_replace(url, tables, replace=replace, confirm=confirm)
        aside = _set_aside_public_schema(url)
    done = run_tool(
        pg_restore,
        ["--single-transaction", "--exit-on-error", "--no-owner", "--no-privileges", str(source)],
        database=connection(url),
    )
    if done.returncode != 0:
        if aside is not None:
            _put_back_public_schema(url, aside)
        raise BackupError(
            f"pg_restore ({pg_restore.describe()}) failed and restored nothing; the database "
            f"is as it was: {error_lines(done)}"
        )
    if aside is not None:
        _drop_schema(url, aside)
    return Restored(backup, apply_migrations(url), len(tables))


def _may_replace(
    url: str, tables: list[str], *, replace: bool, confirm: Callable[[str], bool]
) -> None:
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    if not replace:
        raise BackupError(
            f"the database holds {len(tables)} tables already ({shown}): a backup is restored "
            "into an empty database. Create a new one and point DATABASE_URL at it, or give "
            "--replace to drop these tables first. Nothing was changed"
        )
    if outside := [t for t in tables if not t.startswith("public.")]:
        raise BackupError(
            f"the database holds tables outside the public schema ({', '.join(outside[:5])}), "
            "which a restore would not replace: restore into a new database. Nothing was changed"
        )
    if clients := other_sessions(url):
        raise BackupError(
            f"{len(clients)} other clients are connected to the database "
            f"({', '.join(sorted(set(clients)))}): stop the bot, the servers and the workers "
            "before replacing it. Nothing was changed"
        )
    if not confirm(f"Drop the {len(tables)} tables of the database ({shown}) and restore?"):
        raise BackupError("not confirmed: nothing was changed")
