"""The pool skips asyncpg's reset query, except what a use can leave behind: a LISTEN; and a
lost connection is a `DatabaseUnavailableError`, while a failing query stays what it is."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import asyncpg
import pytest

from cluster_manager.storage.database import (
    DatabaseError,
    DatabaseUnavailableError,
    create_pool,
)


async def test_a_connection_that_listened_is_released_without_its_listen(db_url: str):
    pool = await create_pool(db_url, min_size=1, max_size=1)  # one connection, reused
    try:
        async with pool.acquire() as conn:
            await conn.add_listener("cm_test_channel", lambda *args: None)
            assert await conn.fetchval("SELECT count(*) FROM pg_listening_channels()") == 1
            backend = await conn.fetchval("SELECT pg_backend_pid()")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") == backend
            assert await conn.fetchval("SELECT count(*) FROM pg_listening_channels()") == 0
    finally:
        await pool.close()


async def test_an_open_transaction_is_rolled_back_on_release(db_url: str):
    pool = await create_pool(db_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            await conn.execute("INSERT INTO users (external_id, name) VALUES ('u1', 'U1')")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT count(*) FROM users") == 0
    finally:
        await pool.close()


async def test_a_connection_the_server_dropped_is_unavailable_then_replaced(db_url: str):
    pool = await create_pool(db_url, min_size=1, max_size=1)
    admin = await asyncpg.connect(db_url)
    try:
        backend = await pool.fetchval("SELECT pg_backend_pid()")
        in_flight = asyncio.create_task(pool.fetchval("SELECT pg_sleep(30)"))
        while not await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep%'",
            backend,
        ):
            await asyncio.sleep(0.01)
        assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", backend)
        with pytest.raises(DatabaseUnavailableError, match="the database is unavailable"):
            await asyncio.wait_for(in_flight, 10)
        assert await pool.fetchval("SELECT pg_backend_pid()") != backend  # a new connection
    finally:
        await admin.close()
        await pool.close()


async def test_a_connection_lost_while_it_is_released_is_released(db_url: str):
    """asyncpg's release checks the proxy, then releases the holder in a task of its own; the
    connection lost in between hands the holder back first (a Postgres restart under load did
    this to one client in about twenty)."""
    pool = await create_pool(db_url, min_size=1, max_size=1)
    try:
        conn = await pool.acquire()
        releasing = asyncio.ensure_future(pool.release(conn))
        await asyncio.sleep(0)  # release has checked the proxy and started its task
        assert conn._con is not None and not releasing.done()
        conn._con.terminate()  # what `connection_lost` does: the holder goes back at once
        await releasing
        assert await pool.fetchval("SELECT 1") == 1  # the pool still serves
    finally:
        await pool.close()


async def test_a_failing_query_is_not_an_unavailable_database(db_url: str):
    pool = await create_pool(db_url, min_size=1, max_size=1)
    try:
        with pytest.raises(asyncpg.UndefinedTableError) as caught:
            await pool.fetchval("SELECT * FROM no_such_table")
        assert not isinstance(caught.value, DatabaseUnavailableError)
        async with pool.acquire() as conn, conn.transaction():
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(
                    "INSERT INTO users (external_id, name) VALUES ('u1', 'A'), ('u1', 'B')"
                )
    finally:
        await pool.close()


async def test_no_server_is_a_clear_error_at_start():
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DatabaseError, match="cannot connect to the database"):
        await create_pool(f"postgresql://postgres@127.0.0.1:{port}/postgres")


async def _slow_transaction(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_sleep(5)")


async def _cancelled_twice(pool: asyncpg.Pool) -> None:
    task = asyncio.create_task(_slow_transaction(pool))
    await asyncio.sleep(0.3)
    task.cancel()
    await asyncio.sleep(0)  # the ROLLBACK is under way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _cancelled_at_every_await(pool: asyncpg.Pool) -> None:
    """As anyio cancels a stopping server's event streams: again at every await, until the
    task ends."""
    task = asyncio.create_task(_slow_transaction(pool))
    await asyncio.sleep(0.3)
    while not task.done():
        task.cancel()
        await asyncio.sleep(0)
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.reliability(
    "Faults",
    "a task cancelled again while its transaction rolls back (a stopping server's jobs, its "
    "event streams under anyio's repeated cancellation)",
    "the ROLLBACK completes before the connection returns to the pool: no 'Resetting "
    "connection with an active transaction'",
)
@pytest.mark.parametrize("cancel", [_cancelled_twice, _cancelled_at_every_await])
async def test_a_transaction_cancelled_again_still_ends_before_its_connection_is_released(
    db_url: str, cancel: Callable[[asyncpg.Pool], object], record_property
):
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    pool = await create_pool(db_url, min_size=1, max_size=1)
    try:
        await cancel(pool)
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await pool.close()
        loop.set_exception_handler(None)
    record_property("observed", f"loop errors reported: {reported}")
    assert reported == []
