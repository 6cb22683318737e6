"""One process per role and key among every process on the database, on any machine: a
session advisory lock held by one of the process's connections while it runs (one Discord bot
per bot token). A process that dies loses its connection, and the lock with it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import AsyncIterator

import asyncpg

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.storage.database import Executor


class AlreadyRunningError(ClusterManagerError):
    """Another process holds the role this one would take; the text says which process."""


def lock_key(role: str, key: str) -> int:
    """The advisory lock's 64-bit key: a digest, so that the key (a token) is never stored."""
    digest = hashlib.sha256(f"cluster-manager {role}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_parts(lock: int) -> tuple[int, int]:
    """How `pg_locks` shows a 64-bit advisory key: its high and low halves (classid, objid)."""
    unsigned = lock & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


@contextlib.asynccontextmanager
async def held_alone(pool: asyncpg.Pool, role: str, key: str) -> AsyncIterator[None]:
    """Runs the block as the only `role` process for `key`; raises `AlreadyRunningError`,
    naming the process that is (its host, pid and start), when another one holds it."""
    lock = lock_key(role, key)
    me = f"cluster-manager {role} on {socket.gethostname()}, pid {os.getpid()}"
    async with pool.acquire() as conn:
        await conn.execute("SELECT set_config('application_name', $1, false)", me[:63])
        try:
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", lock):
                raise AlreadyRunningError(await _holder(conn, role, lock))
            try:
                yield
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", lock)
        finally:
            await conn.execute("RESET application_name")


async def _holder(conn: Executor, role: str, lock: int) -> str:
    row = await conn.fetchrow(
        """
        SELECT a.application_name, a.backend_start FROM pg_locks l
        JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.classid::bigint = $1 AND l.objid::bigint = $2
        """,
        *lock_parts(lock),
    )
    who = "another process" if row is None else row["application_name"] or "another process"
    since = "" if row is None else f", connected since {row['backend_start']:%Y-%m-%d %H:%M:%S %Z}"
    return f"a {role} already runs for this key: {who}{since}. Stop it first"
