"""Web sessions, stored by the hash of their id: open one for a token (or the admin token),
tell whose a live one is, close it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cluster_manager.core.records import User
from cluster_manager.storage.database import Executor


@dataclass(frozen=True)
class StoredSession:
    user: User | None  # None: an admin session
    admin_token_hash: bytes | None


async def open_user_session(
    db: Executor, id_hash: bytes, token_hash: bytes, now: datetime, expires_at: datetime
) -> User | None:
    """Opens a session for a live token; the token's user, or None when the token is unknown
    or revoked (and no session was opened). Expired sessions are swept on the way."""
    await db.execute("DELETE FROM web_sessions WHERE expires_at <= $1", now)
    row = await db.fetchrow(
        """
        WITH token AS (
            SELECT t.id, u.id AS user_id, u.external_id, u.name
            FROM api_tokens t JOIN users u ON u.id = t.user_id
            WHERE t.token_hash = $2 AND t.revoked_at IS NULL
        ), opened AS (
            INSERT INTO web_sessions (id_hash, token_id, created_at, expires_at)
            SELECT $1, id, $3, $4 FROM token
        )
        SELECT id AS token_id, user_id, external_id, name FROM token
        """,
        id_hash,
        token_hash,
        now,
        expires_at,
    )
    if row is None:
        return None
    await _keep_newest(db, token_id=row["token_id"])
    return User(row["user_id"], row["external_id"], row["name"])


# Sessions one token (or the admin token) keeps open: a browser or two per person; signing
# in again and again closes the oldest instead of piling up month-long sessions.
MAX_SESSIONS_PER_TOKEN = 20


# All but the newest `MAX_SESSIONS_PER_TOKEN` sessions of one token ($1), or of the admin
# token ($2: its hash); the other parameter is NULL.
_CLOSE_OLDEST = """
    DELETE FROM web_sessions WHERE (token_id = $1 OR admin_token_hash = $2)
      AND id_hash NOT IN (
        SELECT id_hash FROM web_sessions WHERE token_id = $1 OR admin_token_hash = $2
        ORDER BY created_at DESC, id_hash LIMIT $3
      )
"""


async def _keep_newest(
    db: Executor, *, token_id: int | None = None, admin_hash: bytes | None = None
) -> None:
    await db.execute(_CLOSE_OLDEST, token_id, admin_hash, MAX_SESSIONS_PER_TOKEN)


async def open_admin_session(
    db: Executor, id_hash: bytes, admin_token_hash: bytes, now: datetime, expires_at: datetime
) -> None:
    await db.execute("DELETE FROM web_sessions WHERE expires_at <= $1", now)
    await db.execute(
        "INSERT INTO web_sessions (id_hash, admin_token_hash, created_at, expires_at)"
        " VALUES ($1, $2, $3, $4)",
        id_hash,
        admin_token_hash,
        now,
        expires_at,
    )
    await _keep_newest(db, admin_hash=admin_token_hash)


async def live_session(db: Executor, id_hash: bytes, now: datetime) -> StoredSession | None:
    """The session with this id if it has not expired and its token is still live."""
    row = await db.fetchrow(
        """
        SELECT s.admin_token_hash, u.id AS user_id, u.external_id, u.name
        FROM web_sessions s
        LEFT JOIN api_tokens t ON t.id = s.token_id
        LEFT JOIN users u ON u.id = t.user_id
        WHERE s.id_hash = $1 AND s.expires_at > $2
          AND (s.admin_token_hash IS NOT NULL OR t.revoked_at IS NULL)
        """,
        id_hash,
        now,
    )
    if row is None:
        return None
    user = None if row["user_id"] is None else User(row["user_id"], row["external_id"], row["name"])
    return StoredSession(user, row["admin_token_hash"])


async def close_session(db: Executor, id_hash: bytes) -> None:
    await db.execute("DELETE FROM web_sessions WHERE id_hash = $1", id_hash)
