"""Schema migrations with yoyo, shipped in the package (`cluster_manager/data/migrations/`).
Never edit one that was applied: add a new one (expand, migrate the data, then contract in a
later one)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from cluster_manager.data import MIGRATIONS_DIR
from cluster_manager.storage.database import DatabaseError, unreachable

if TYPE_CHECKING:
    import asyncpg


def yoyo_url(url: str) -> str:
    """yoyo picks its driver from the scheme; ours is psycopg 3."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg://", url)


def _backend_and_migrations(url: str, directory: Path):  # type: ignore[no-untyped-def]
    from yoyo import get_backend, read_migrations

    if not directory.is_dir():
        raise DatabaseError(f"no migrations folder at {directory}")
    try:
        backend = get_backend(yoyo_url(url))
    except Exception as exc:  # yoyo and psycopg raise their own trees
        raise unreachable("cannot open the database for migrations", exc) from exc
    return backend, read_migrations(str(directory))


def migration_ids(directory: Path = MIGRATIONS_DIR) -> list[str]:
    """The shipped migrations' ids (yoyo's: the file name without `.sql`), in order."""
    return sorted(p.stem for p in directory.glob("*.sql") if not p.stem.endswith(".rollback"))


async def pending_on(pool: asyncpg.Pool, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """What `pending_migrations` says, read from yoyo's own table through the app's pool:
    every command that opens the database asks, and yoyo with its psycopg driver takes
    a third of a second to import."""
    done: set[str] = set()
    if await pool.fetchval("SELECT to_regclass('_yoyo_migration') IS NOT NULL"):
        done = {row[0] for row in await pool.fetch("SELECT migration_id FROM _yoyo_migration")}
    return [i for i in migration_ids(directory) if i not in done]


def pending_migrations(url: str, directory: Path = MIGRATIONS_DIR) -> list[str]:
    backend, migrations = _backend_and_migrations(url, directory)
    try:
        return [m.id for m in backend.to_apply(migrations)]
    finally:
        backend.connection.close()


def apply_migrations(url: str, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Applies what is pending, under yoyo's lock (safe with several processes); returns ids."""
    backend, migrations = _backend_and_migrations(url, directory)
    try:
        with backend.lock():
            pending = backend.to_apply(migrations)
            backend.apply_migrations(pending)
        return [m.id for m in pending]
    finally:
        backend.connection.close()
