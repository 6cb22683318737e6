"""Teams on a leaderboard: create one, invite, join, leave; a team's members rank as one
entry (storage.rankings), and where the leaderboard says so share its hourly quota
(service.quotas). Every change runs under the leaderboard's team lock, and none is taken from
a banned user. A change after the deadline is taken too: the competition's ranking reads the
teams as they stood at its deadline, so only the ranking of the runs after it sees it."""

from __future__ import annotations

import secrets

from cluster_manager.core.records import Leaderboard
from cluster_manager.core.teams import MAX_TEAM_SIZE, Team, check_team_name
from cluster_manager.service.context import Context
from cluster_manager.service.controls import check_not_banned
from cluster_manager.service.errors import (
    AlreadyExistsError,
    AlreadyInTeamError,
    InvalidTeamSizeError,
    NotFoundError,
    TeamError,
    TeamFullError,
    UnknownTeamCodeError,
)
from cluster_manager.service.invites import check_member, is_member_of
from cluster_manager.service.leaderboards import find_leaderboard, missing_for, visible_or_none
from cluster_manager.service.receipts import Submitter
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import teams as team_store
from cluster_manager.storage.database import Connection

CODE_BYTES = 9  # 72 random bits, as a leaderboard's invite codes
# Unused codes a member may hold at once: enough to invite a full team, few enough that a
# member cannot hand out codes by the thousand (each stays good until used or they leave).
MAX_LIVE_CODES = 10
UNKNOWN_CODE = "that team code is unknown or was used already"


class Teams:
    """Teams on a leaderboard: create, invite, join, leave."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock

    async def create(self, leaderboard: str, name: str, user: Submitter) -> Team:
        """A new team on the leaderboard with `user` as its first member."""
        check_team_name(name)
        board = await self._team_board(leaderboard, user)
        async with self.pool.acquire() as conn, conn.transaction():
            await team_store.lock_board_teams(conn, board.id)
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await check_member(conn, board, found.id)
            await check_not_banned(conn, found.id, "create a team")
            await _not_in_a_team(conn, board, found.id)
            if await team_store.name_taken(conn, board.id, name):
                raise AlreadyExistsError(f"{board.name!r} has a team named {name!r} already")
            team_id = await team_store.create_team(conn, board.id, name, found.id, self.clock())
            return await _team(conn, team_id)

    async def invite(self, leaderboard: str, user: Submitter) -> str:
        """A code that lets one more user join `user`'s team (each code is good once, and
        only while `user` stays in the team)."""
        board = await self._team_board(leaderboard, user)
        async with self.pool.acquire() as conn, conn.transaction():
            await team_store.lock_board_teams(conn, board.id)
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await check_not_banned(conn, found.id, "invite to a team")
            team_id = await _own_team(conn, board, found.id)
            members = await team_store.member_count(conn, team_id)
            if members >= board.team_size:
                raise TeamFullError(
                    f"your team has {members} members, as many as {board.name!r} allows: "
                    "nobody could join with a new code"
                )
            live = await team_store.live_invites(conn, team_id, found.id)
            if live >= MAX_LIVE_CODES:
                raise TeamError(
                    f"you hold {live} unused team codes on {board.name!r}, as many as one "
                    "member may: each stays good until used or you leave the team"
                )
            code = "team_" + secrets.token_urlsafe(CODE_BYTES)
            await team_store.insert_invite(conn, code, team_id, found.id, self.clock())
            return code

    async def join(self, code: str, user: Submitter) -> Team:
        """Redeems a team's code: `user` joins the team, if the leaderboard's size limit and
        their other teams allow."""
        async with self.pool.acquire() as conn, conn.transaction():
            target = await team_store.invite_target(conn, code.strip())
            if target is None:
                raise UnknownTeamCodeError(UNKNOWN_CODE)
            team_id, board_id = target
            board = await lb_store.get_leaderboard_by_id(conn, board_id)
            assert board is not None  # a team goes with its leaderboard
            await team_store.lock_board_teams(conn, board.id)
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            if not await is_member_of(conn, board, found.id):
                # As an unknown code, word for word: the board's name is no stranger's.
                raise UnknownTeamCodeError(UNKNOWN_CODE)
            await check_not_banned(conn, found.id, "join a team")
            await _not_in_a_team(conn, board, found.id)
            if await team_store.member_count(conn, team_id) >= board.team_size:
                raise TeamFullError(
                    f"the team has {board.team_size} members, as many as {board.name!r} allows"
                )
            await team_store.use_invite(conn, code.strip())
            await team_store.add_member(conn, board.id, team_id, found.id, self.clock())
            return await _team(conn, team_id)

    async def leave(self, leaderboard: str, user: Submitter) -> str:
        """Takes `user` out of their team on the leaderboard (a team left empty is disbanded,
        and the codes they made stop working); the team's name. Their ranked submissions rank
        as their own again, except in the final standings of a board past its deadline."""
        board = await self._team_board(leaderboard, user)
        async with self.pool.acquire() as conn, conn.transaction():
            await team_store.lock_board_teams(conn, board.id)
            found = await lb_store.get_user(conn, user.external_id)
            team = None if found is None else await team_store.team_of(conn, board.id, found.id)
            if found is None or team is None:
                raise NotFoundError(f"you are in no team on {board.name!r}")
            await check_not_banned(conn, found.id, "leave a team")
            await team_store.remove_member(conn, board.id, found.id, self.clock())
            return team.name

    async def of_user(self, leaderboard: str, user: Submitter) -> Team | None:
        board = await self._team_board(leaderboard, user)
        found = await lb_store.get_user(self.pool, user.external_id)
        return None if found is None else await team_store.team_of(self.pool, board.id, found.id)

    async def all(
        self, leaderboard: str, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> list[Team]:
        """Every team on the leaderboard with its members, by name (an invite-only board's
        to its members, or to all with `include_closed`)."""
        board = await self._team_board(leaderboard, viewer, include_closed)
        return await team_store.teams_of_board(self.pool, board.id)

    async def count(
        self, leaderboard: str, viewer: Submitter | None = None, *, include_closed: bool = False
    ) -> int:
        """How many teams the leaderboard has (seen by whoever may see its teams)."""
        board = await self._team_board(leaderboard, viewer, include_closed)
        return await team_store.count_teams(self.pool, board.id)

    async def set_rules(
        self, leaderboard: str, *, size: int | None = None, quotas: bool | None = None
    ) -> Leaderboard:
        """The leaderboard's largest team, and whether its hourly quota counts a team's
        submissions together; teams already larger keep their members and take no more."""
        if size is not None and not 1 <= size <= MAX_TEAM_SIZE:
            raise InvalidTeamSizeError(f"a team has 1 to {MAX_TEAM_SIZE} members, not {size}")
        board = await find_leaderboard(self.pool, leaderboard)
        await team_store.set_team_rules(self.pool, board.id, size=size, quotas=quotas)
        return await find_leaderboard(self.pool, board.name)

    async def _team_board(
        self, name: str, user: Submitter | None, include_closed: bool = False
    ) -> Leaderboard:
        """The leaderboard as `user` may see it: an invite-only one they have not joined is
        missing, as everywhere."""
        found = await visible_or_none(self.pool, name, user, include_closed)
        if found is None:
            raise await missing_for(self.pool, name, user, include_closed)
        return found


async def _not_in_a_team(conn: Connection, board: Leaderboard, user_id: int) -> None:
    current = await team_store.team_of(conn, board.id, user_id)
    if current is not None:
        raise AlreadyInTeamError(
            f"you are in team {current.name!r} on {board.name!r}: leave it first"
        )


async def _own_team(conn: Connection, board: Leaderboard, user_id: int) -> int:
    team_id = await team_store.team_id_of(conn, board.id, user_id)
    if team_id is None:
        raise TeamError(f"you are in no team on {board.name!r}: create one or join one first")
    return team_id


async def _team(conn: Connection, team_id: int) -> Team:
    team = await team_store.team_by_id(conn, team_id)
    assert team is not None  # made or joined in this transaction
    return team
