"""API tokens: issuing one to a user (the bot's `/token`, `cluster-manager user token`),
revoking it, and telling who a token belongs to (the HTTP API)."""

from __future__ import annotations

import hashlib
import secrets

from cluster_manager.service.context import Context
from cluster_manager.service.errors import UnauthorizedError
from cluster_manager.service.receipts import Submitter
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import tokens as token_store

TOKEN_PREFIX = "cm_"  # noqa: S105 - not a secret: makes a leaked token easy to recognise (secret scanners, logs)
TOKEN_BYTES = 32  # 256 random bits
MAX_TOKEN_CHARS = 256  # anything longer is not one of ours: refused before hashing


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class Accounts:
    """API tokens: issuing, revoking, authenticating."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock

    async def issue_token(self, user: Submitter) -> str:
        """A new token for `user` (created if new); their previous token stops working. The
        token is returned once and stored only as a hash."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await token_store.replace_token(conn, found.id, token_hash(token), self.clock())
        return token

    async def revoke_token(self, external_id: str) -> bool:
        """Revokes the user's token; False when they had none (or are unknown)."""
        found = await lb_store.get_user(self.pool, external_id)
        if found is None:
            return False
        return await token_store.revoke_tokens(self.pool, found.id, self.clock()) > 0

    async def authenticate(self, token: str) -> Submitter:
        """The user a live token belongs to."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise UnauthorizedError("unknown or revoked API token")
        found = await token_store.user_of_token(self.pool, token_hash(token), self.clock())
        if found is None:
            raise UnauthorizedError("unknown or revoked API token")
        return Submitter(found.external_id, found.name)
