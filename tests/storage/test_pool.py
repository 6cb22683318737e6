"""The pool skips asyncpg's reset query, except what a use can leave behind: a LISTEN."""

from __future__ import annotations

from cluster_manager.storage.database import create_pool


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
