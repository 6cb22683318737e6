"""Where the database is: `DATABASE_URL`, or an embedded Postgres in the data directory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg

from cluster_manager.errors import ClusterManagerError
from cluster_manager.storage.runtime_dir import ensure_runtime_dir

# What a call may raise while the server restarts or drops the connection: asyncpg reports a
# connection lost mid-operation as an InterfaceError or InternalClientError, not only as a
# PostgresError. The pool replaces such connections; the caller retries later.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)

log = logging.getLogger(__name__)

Executor = asyncpg.Pool | asyncpg.Connection


class DatabaseError(ClusterManagerError):
    pass


def without_nul(value: Any) -> Any:
    """Postgres text and JSONB cannot hold U+0000; output from submissions can."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value


def _encode_json(value: Any) -> str:
    return json.dumps(without_nul(value))


async def _init_connection(conn: asyncpg.Connection) -> None:
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(
            kind, encoder=_encode_json, decoder=json.loads, schema="pg_catalog"
        )


class _PooledConnection(asyncpg.Connection):  # type: ignore[misc]
    """Skips the reset query (a round trip on every release) for connections that need none.

    Our queries leave nothing in the session: advisory locks are transaction-scoped, no SET,
    no cursors, and asyncpg always rolls back an open transaction on release. Only LISTEN
    outlives a use, so a connection that listened still gets `UNLISTEN *`.
    """

    _listened = False

    async def add_listener(self, channel: str, callback: Any) -> None:
        self._listened = True
        await super().add_listener(channel, callback)

    def get_reset_query(self) -> str:
        if self._listened:
            self._listened = False
            return "UNLISTEN *;"
        return ""


async def create_pool(url: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    try:
        pool = await asyncpg.create_pool(
            url,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            connection_class=_PooledConnection,
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise DatabaseError(f"cannot connect to the database: {exc}") from exc
    assert pool is not None
    return pool


@contextlib.asynccontextmanager
async def embedded_postgres(data_dir: Path) -> AsyncIterator[str]:
    """A real Postgres shipped in a wheel (pgserver), kept in `data_dir`, stopped on exit."""
    ensure_runtime_dir()  # before the import: pgserver asks for its runtime directory then
    import pgserver

    data_dir = data_dir.resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server: Any = await asyncio.to_thread(pgserver.get_server, data_dir, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises plain exceptions from initdb/pg_ctl
        raise DatabaseError(f"cannot start the embedded Postgres in {data_dir}: {exc}") from exc
    try:
        yield server.get_uri()
    finally:
        await asyncio.to_thread(server.cleanup)


@contextlib.asynccontextmanager
async def database_url(url: str | None, data_dir: Path) -> AsyncIterator[tuple[str, bool]]:
    """Yields (url, embedded): the given URL, or an embedded server's for the session."""
    if url:
        yield url, False
        return
    async with embedded_postgres(data_dir / "postgres") as embedded:
        yield embedded, True
