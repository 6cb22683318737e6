"""API tokens, stored as hashes: issue (revoking the user's previous one), look up, revoke."""

from __future__ import annotations

from datetime import datetime

from cluster_manager.core.records import User
from cluster_manager.storage.database import Connection, Executor


async def replace_token(conn: Connection, user_id: int, token_hash: bytes, now: datetime) -> None:
    """Revokes the user's live token, if any, and stores the new one. Call in a transaction."""
    await revoke_tokens(conn, user_id, now)
    await conn.execute(
        "INSERT INTO api_tokens (user_id, token_hash, created_at) VALUES ($1, $2, $3)",
        user_id,
        token_hash,
        now,
    )


async def revoke_tokens(db: Executor, user_id: int, now: datetime) -> int:
    """Revokes the user's live token; how many were revoked (0 or 1)."""
    result = await db.execute(
        "UPDATE api_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL",
        user_id,
        now,
    )
    return int(result.split()[-1])


async def user_of_token(db: Executor, token_hash: bytes, now: datetime) -> User | None:
    """The user a live token belongs to, noting that it was used; None for an unknown or revoked
    token."""
    row = await db.fetchrow(
        """
        UPDATE api_tokens t SET last_used_at = $2
        FROM users u
        WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND u.id = t.user_id
        RETURNING u.id, u.external_id, u.name
        """,
        token_hash,
        now,
    )
    return None if row is None else User(row["id"], row["external_id"], row["name"])


async def token_times(db: Executor, user_id: int) -> tuple[datetime, datetime | None] | None:
    """(created_at, last_used_at) of the user's live token, or None."""
    row = await db.fetchrow(
        "SELECT created_at, last_used_at FROM api_tokens WHERE user_id = $1 AND revoked_at IS NULL",
        user_id,
    )
    return None if row is None else (row["created_at"], row["last_used_at"])
