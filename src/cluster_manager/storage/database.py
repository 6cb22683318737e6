"""Where the database is: `DATABASE_URL`, or an embedded Postgres in the data directory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
import asyncpg.transaction
from asyncpg import Record

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.storage.runtime_dir import ensure_runtime_dir

# What a lost, refused or dropped connection raises (a server restart, say). asyncpg reports
# a connection lost mid-operation as an InterfaceError or InternalClientError, and a server
# shutting down as one of the 57P0x errors. Nothing else is "unavailable": a failing query
# is a failing query, and must not be retried as if the server were away.
_LOST_CONNECTION: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy
    from asyncpg.transaction import _IsolationLevels as IsolationLevels

    # What storage functions take: a pool's connection is a proxy of one.
    Connection: TypeAlias = asyncpg.Connection[Record] | PoolConnectionProxy[Record]
    Executor: TypeAlias = asyncpg.Pool[Record] | Connection
else:
    Connection = asyncpg.Connection
    Executor = asyncpg.Pool | asyncpg.Connection


class DatabaseError(ClusterManagerError):
    """The database failed us: not the user's to fix, and its text may describe the host."""


class DatabaseUnreachableError(DatabaseError):
    """No connection could be opened at all (refused, unknown host, no such database, a
    wrong password): `reason` says why in one line, for a front end's own words."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def unreachable(what: str, exc: BaseException) -> DatabaseUnreachableError:
    """`DatabaseUnreachableError` for a failed connection: `what` failed, and why."""
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    return DatabaseUnreachableError(f"{what}: {text or reason}", reason)


class DatabaseUnavailableError(DatabaseError):
    """The server could not be reached or dropped the connection: the operation did not
    happen, or its outcome is unknown. The pool replaces the connection; try again later."""


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except _LOST_CONNECTION as exc:
        raise DatabaseUnavailableError(f"the database is unavailable: {exc}") from exc


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


class _PooledConnection(asyncpg.Connection):
    """Skips the reset query (a round trip on every release) for connections that need none.

    Our queries leave nothing in the session: advisory locks are transaction-scoped, no SET,
    no cursors, and asyncpg always rolls back an open transaction on release. Only LISTEN
    outlives a use, so a connection that listened still gets `UNLISTEN *`.
    """

    _listened = False

    async def add_listener(self, channel: str, callback: Any) -> None:
        self._listened = True
        with _translated():
            await super().add_listener(channel, callback)

    async def remove_listener(self, channel: str, callback: Any) -> None:
        with _translated():
            await super().remove_listener(channel, callback)

    def transaction(
        self,
        *,
        isolation: IsolationLevels | None = None,
        readonly: bool = False,
        deferrable: bool = False,
    ) -> _Transaction:
        # As asyncpg's own, with our class; starting it checks that the connection is open.
        return _Transaction(self, isolation, readonly, deferrable)

    # Every query of ours goes through these.
    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        with _translated():
            return await super().execute(*args, **kwargs)

    async def executemany(self, *args: Any, **kwargs: Any) -> Any:
        with _translated():
            return await super().executemany(*args, **kwargs)

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        with _translated():
            return await super().fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        with _translated():
            return await super().fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        with _translated():
            return await super().fetchval(*args, **kwargs)

    def get_reset_query(self) -> str:
        if self._listened:
            self._listened = False
            return "UNLISTEN *;"
        return ""


@contextlib.asynccontextmanager
async def listening(
    pool: asyncpg.Pool, channel: str, callback: Callable[..., None]
) -> AsyncIterator[Connection]:
    """A connection of the pool that listens on `channel` while the block runs. If the server
    dropped it meanwhile, there is nothing left to unlisten."""
    async with pool.acquire() as conn:
        await conn.add_listener(channel, callback)
        try:
            yield conn
        finally:
            # asyncpg's pool reports a connection it has already let go as an InterfaceError.
            with contextlib.suppress(DatabaseUnavailableError, asyncpg.InterfaceError):
                await conn.remove_listener(channel, callback)


async def round_trip_ms(db: Executor) -> float:
    """How long the server takes to answer the smallest query."""
    started = time.perf_counter()
    await db.fetchval("SELECT 1")
    return (time.perf_counter() - started) * 1000


class _Transaction(asyncpg.transaction.Transaction):
    """asyncpg's transaction, whose end on a lost connection raises a DatabaseUnavailableError
    too (asyncpg checks the connection before it sends COMMIT or ROLLBACK)."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        with _translated():
            await super().__aenter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        # The COMMIT or ROLLBACK runs to its end even when the task is cancelled again
        # meanwhile: a stopping server cancels its scheduler's jobs and its event streams,
        # and anyio cancels a stream at every await. Cut short, it would leave the connection
        # inside the transaction on its way back to the pool ("Resetting connection with an
        # active transaction").
        ending = asyncio.ensure_future(self._end(*exc_info))
        cancelled = False
        while True:
            try:
                await asyncio.shield(ending)
                break
            except asyncio.CancelledError:
                if ending.done():
                    raise  # the end itself was cancelled (the event loop is closing)
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError

    async def _end(self, *exc_info: Any) -> None:
        with _translated():
            await super().__aexit__(*exc_info)

    async def start(self) -> None:
        with _translated():
            await super().start()

    async def commit(self) -> None:
        with _translated():
            await super().commit()

    async def rollback(self) -> None:
        with _translated():
            await super().rollback()


async def _connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
    """How the pool opens a connection (also when it replaces a lost one on acquire)."""
    with _translated():
        return await asyncpg.connect(*args, **kwargs)


class _Pool(asyncpg.Pool):
    """asyncpg's pool, whose release survives a connection lost while it is being released.

    `Pool.release` checks that the proxy is still attached, then releases its holder in a task
    of its own; a `connection_lost` that runs in between already hands the holder back to the
    pool (and detaches the proxy), and the task then raises `InternalClientError` ("release()
    called on a free connection holder"). The connection was released: that is not an error.
    """

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:
        try:
            await super().release(connection, timeout=timeout)
        except asyncpg.exceptions.InternalClientError:
            if connection._con is not None:  # not released meanwhile: a real fault
                raise


async def create_pool(url: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    try:
        # As `asyncpg.create_pool` builds its pool, with our release.
        pool = await _Pool(
            url,
            min_size=min_size,
            max_size=max_size,
            max_queries=50000,
            max_inactive_connection_lifetime=300.0,
            connect=_connect,
            init=_init_connection,
            loop=None,
            connection_class=_PooledConnection,
            record_class=asyncpg.Record,
        )
    except (DatabaseUnavailableError, asyncpg.PostgresError) as exc:
        raise unreachable("cannot connect to the database", exc.__cause__ or exc) from exc
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


def embedded_exists(data_dir: Path) -> bool:
    """Whether `database_url` would find the embedded Postgres of `data_dir` made already
    (else it initialises a new, empty one there)."""
    return (data_dir / "postgres" / "PG_VERSION").is_file()


@contextlib.asynccontextmanager
async def database_url(url: str | None, data_dir: Path) -> AsyncIterator[tuple[str, bool]]:
    """Yields (url, embedded): the given URL, or an embedded server's for the session."""
    if url:
        yield url, False
        return
    async with embedded_postgres(data_dir / "postgres") as embedded:
        yield embedded, True
