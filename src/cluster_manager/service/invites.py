"""Invite-only leaderboards: closing and opening one, minting, listing and revoking its invite
codes, and a user joining with one. Submissions to a closed leaderboard pass
`check_member`."""

from __future__ import annotations

import secrets

from cluster_manager.core.records import Leaderboard
from cluster_manager.service.context import Context
from cluster_manager.service.controls import check_not_banned
from cluster_manager.service.errors import InvalidInviteError, InvalidMintError
from cluster_manager.service.leaderboards import find_leaderboard, missing
from cluster_manager.service.receipts import Submitter
from cluster_manager.storage import invites as invite_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage.database import Executor
from cluster_manager.storage.invites import Invite

MAX_MINTED = 500
MAX_USES = 10_000
CODE_BYTES = 9  # 72 random bits: not guessable at any request rate the API allows


async def is_member_of(db: Executor, board: Leaderboard, user_id: int) -> bool:
    """Whether the user may see and use the board: it is open, or they joined it."""
    return not board.closed or await invite_store.is_member(db, board.id, user_id)


async def check_member(db: Executor, board: Leaderboard, user_id: int) -> None:
    """To a non-member an invite-only board is missing, word for word as one that does not
    exist: saying "invite-only" would tell a stranger that it does."""
    if not await is_member_of(db, board, user_id):
        raise missing(board.name)


class Invites:
    """Invite-only leaderboards: closing and opening one, its codes, joining with one."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock

    async def set_closed(self, name: str, closed: bool) -> None:
        """Closes a leaderboard to all but its members, or opens it to everyone."""
        board = await find_leaderboard(self.pool, name)
        await invite_store.set_closed(self.pool, board.id, closed)

    async def mint(self, name: str, count: int, max_uses: int, actor: str) -> list[str]:
        """`count` new codes for the leaderboard, each good for `max_uses` users."""
        if not 1 <= count <= MAX_MINTED:
            raise InvalidMintError(f"mint 1 to {MAX_MINTED} codes at a time, not {count}")
        if not 1 <= max_uses <= MAX_USES:
            raise InvalidMintError(f"a code may be used 1 to {MAX_USES} times, not {max_uses}")
        board = await find_leaderboard(self.pool, name)
        codes = ["inv_" + secrets.token_urlsafe(CODE_BYTES) for _ in range(count)]
        async with self.pool.acquire() as conn, conn.transaction():
            await invite_store.insert_invites(conn, board.id, codes, max_uses, actor, self.clock())
        return codes

    async def all(self, name: str) -> list[Invite]:
        board = await find_leaderboard(self.pool, name)
        return await invite_store.invites_of(self.pool, board.id)

    async def revoke(self, code: str) -> bool:
        """Stops a code from being redeemed again (who joined with it stays a member)."""
        return await invite_store.revoke(self.pool, code.strip(), self.clock())

    async def join(self, code: str, user: Submitter) -> tuple[str, bool]:
        """Redeems a code: (leaderboard name, whether the user newly joined). A banned user
        is refused before the code is read: it keeps its uses for someone else."""
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await check_not_banned(conn, found.id, "join a leaderboard")
            try:
                return await invite_store.redeem(conn, code.strip(), found.id, self.clock())
            except LookupError as exc:
                raise InvalidInviteError(str(exc)) from None
