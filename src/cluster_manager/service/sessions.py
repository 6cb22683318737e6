"""Web sessions: signing in to the pages with an API token (or the admin token), and telling
who a session cookie belongs to. The cookie holds a random id, never the token."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from cluster_manager.service.accounts import MAX_TOKEN_CHARS, token_hash
from cluster_manager.service.context import Context
from cluster_manager.service.errors import UnauthorizedError
from cluster_manager.service.receipts import Submitter
from cluster_manager.storage import sessions as session_store

SESSION_LIFETIME = timedelta(days=30)
SESSION_ID_BYTES = 32
MAX_SESSION_ID_CHARS = 64


@dataclass(frozen=True)
class WebSession:
    user: Submitter | None  # None: the admin, who acts for no user
    admin: bool


def _id_hash(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).digest()


def _same(a: bytes | None, b: bytes | None) -> bool:
    return a is not None and b is not None and hmac.compare_digest(a, b)


class WebSessions:
    """Web sessions: signing in to the pages with a token."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock

    async def open(self, token: str, *, admin_token: str | None) -> str:
        """A new session id for a live API token, or for the admin token."""
        token = token.strip()
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise UnauthorizedError("unknown or revoked API token")
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        now = self.clock()
        expires_at = now + SESSION_LIFETIME
        presented = token_hash(token)
        admin_hash = token_hash(admin_token) if admin_token else None
        if _same(presented, admin_hash):
            await session_store.open_admin_session(
                self.pool, _id_hash(session_id), presented, now, expires_at
            )
            return session_id
        user = await session_store.open_user_session(
            self.pool, _id_hash(session_id), presented, now, expires_at
        )
        if user is None:
            raise UnauthorizedError("unknown or revoked API token")
        return session_id

    async def get(self, session_id: str, *, admin_token: str | None) -> WebSession | None:
        """Whose session this is; None once it has expired, its token was revoked, or (for an
        admin session) the admin token has changed."""
        if not session_id or len(session_id) > MAX_SESSION_ID_CHARS:
            return None
        found = await session_store.live_session(self.pool, _id_hash(session_id), self.clock())
        if found is None:
            return None
        if found.user is not None:
            return WebSession(Submitter(found.user.external_id, found.user.name), admin=False)
        admin_hash = token_hash(admin_token) if admin_token else None
        return WebSession(None, admin=True) if _same(found.admin_token_hash, admin_hash) else None

    async def close(self, session_id: str) -> None:
        if session_id and len(session_id) <= MAX_SESSION_ID_CHARS:
            await session_store.close_session(self.pool, _id_hash(session_id))
