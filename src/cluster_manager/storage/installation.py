"""This installation's id: made once by a migration, carried in every dispatch key."""

from __future__ import annotations

from cluster_manager.storage.database import DatabaseError, Executor


async def installation_id(db: Executor) -> str:
    found = await db.fetchval("SELECT id FROM installation")
    if found is None:
        raise DatabaseError("the database has no installation id: run `cluster-manager db migrate`")
    return str(found)
