"""What the app asks before it opens a database: which shipped migrations it lacks, read from
yoyo's table through the app's own pool, the same answer yoyo gives."""

from __future__ import annotations

import asyncio

import psycopg

from cluster_manager.storage.database import create_pool
from cluster_manager.storage.migrations import migration_ids, pending_migrations, pending_on


async def _pending_on(url: str) -> list[str]:
    pool = await create_pool(url)
    try:
        return await pending_on(pool)
    finally:
        await pool.close()


async def test_a_database_missing_migrations_is_told_the_same_by_yoyo_and_the_pool(
    fresh_db_url: str,
):
    assert await _pending_on(fresh_db_url) == [] == pending_migrations(fresh_db_url)
    last, second_last = migration_ids()[-1], migration_ids()[-2]
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM _yoyo_migration WHERE migration_id = ANY(%s)", ([last, second_last],)
        )
    yoyo = await asyncio.to_thread(pending_migrations, fresh_db_url)
    assert await _pending_on(fresh_db_url) == [second_last, last] == yoyo


async def test_a_database_yoyo_never_touched_lacks_every_migration(fresh_db_url: str):
    with psycopg.connect(fresh_db_url, autocommit=True) as conn:
        conn.execute("DROP TABLE _yoyo_migration")
    assert await _pending_on(fresh_db_url) == migration_ids()
    assert migration_ids()[0] == "0001.initial" and len(migration_ids()) >= 16
