"""Teams, their members and invite codes; a user is in at most one team per leaderboard."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cluster_manager.core.teams import Team
from cluster_manager.storage.database import Connection, Executor

_SELECT_TEAM = """
    SELECT t.id, t.name, t.created_at, l.name AS leaderboard, l.team_size,
           ARRAY(SELECT u.external_id FROM team_members m JOIN users u ON u.id = m.user_id
                 WHERE m.team_id = t.id ORDER BY m.joined_at, u.external_id) AS members
    FROM teams t JOIN leaderboards l ON l.id = t.leaderboard_id
"""


def _team(row: asyncpg.Record) -> Team:
    return Team(
        leaderboard=row["leaderboard"],
        name=row["name"],
        members=tuple(row["members"]),
        created_at=row["created_at"],
        size_limit=row["team_size"],
    )


async def lock_board_teams(conn: Connection, leaderboard_id: int) -> None:
    """Until the transaction ends, one team change at a time on a leaderboard: a size limit
    and one team per user hold under racing joins."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('cm-teams:' || $1))", str(leaderboard_id)
    )


async def team_id_of(db: Executor, leaderboard_id: int, user_id: int) -> int | None:
    found: int | None = await db.fetchval(
        "SELECT team_id FROM team_members WHERE leaderboard_id = $1 AND user_id = $2",
        leaderboard_id,
        user_id,
    )
    return found


async def team_of(db: Executor, leaderboard_id: int, user_id: int) -> Team | None:
    row = await db.fetchrow(
        _SELECT_TEAM + " WHERE t.id = (SELECT team_id FROM team_members"
        " WHERE leaderboard_id = $1 AND user_id = $2)",
        leaderboard_id,
        user_id,
    )
    return None if row is None else _team(row)


async def team_by_id(db: Executor, team_id: int) -> Team | None:
    row = await db.fetchrow(_SELECT_TEAM + " WHERE t.id = $1", team_id)
    return None if row is None else _team(row)


async def teams_of_board(db: Executor, leaderboard_id: int) -> list[Team]:
    rows = await db.fetch(
        _SELECT_TEAM + " WHERE t.leaderboard_id = $1 ORDER BY t.name", leaderboard_id
    )
    return [_team(r) for r in rows]


async def count_teams(db: Executor, leaderboard_id: int) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM teams WHERE leaderboard_id = $1", leaderboard_id
    )
    return count


async def name_taken(db: Executor, leaderboard_id: int, name: str) -> bool:
    """Team names are told apart without case: 'Fast' and 'fast' would read as one."""
    taken: bool = await db.fetchval(
        "SELECT EXISTS (SELECT 1 FROM teams WHERE leaderboard_id = $1 AND lower(name) = lower($2))",
        leaderboard_id,
        name,
    )
    return taken


async def create_team(
    conn: Connection, leaderboard_id: int, name: str, user_id: int, now: datetime
) -> int:
    """A new team with its creator as its first member; its id."""
    team_id: int = await conn.fetchval(
        "INSERT INTO teams (leaderboard_id, name, created_by, created_at)"
        " VALUES ($1, $2, $3, $4) RETURNING id",
        leaderboard_id,
        name,
        user_id,
        now,
    )
    await add_member(conn, leaderboard_id, team_id, user_id, now)
    return team_id


async def add_member(
    conn: Connection, leaderboard_id: int, team_id: int, user_id: int, now: datetime
) -> None:
    await conn.execute(
        "INSERT INTO team_members (leaderboard_id, user_id, team_id, joined_at)"
        " VALUES ($1, $2, $3, $4)",
        leaderboard_id,
        user_id,
        team_id,
        now,
    )


async def member_count(db: Executor, team_id: int) -> int:
    count: int = await db.fetchval("SELECT count(*) FROM team_members WHERE team_id = $1", team_id)
    return count


async def remove_member(conn: Connection, leaderboard_id: int, user_id: int) -> int | None:
    """Takes the user out of their team on the leaderboard, and removes a team left empty;
    the team's id, or None when they were in none."""
    team_id: int | None = await conn.fetchval(
        "DELETE FROM team_members WHERE leaderboard_id = $1 AND user_id = $2 RETURNING team_id",
        leaderboard_id,
        user_id,
    )
    # A code speaks for its minter's membership: it goes when they do.
    await conn.execute(
        "DELETE FROM team_invites WHERE team_id = $1 AND created_by = $2", team_id, user_id
    )
    if team_id is not None and await member_count(conn, team_id) == 0:
        await conn.execute("DELETE FROM teams WHERE id = $1", team_id)
    return team_id


async def insert_invite(
    conn: Connection, code: str, team_id: int, user_id: int, now: datetime
) -> None:
    await conn.execute(
        "INSERT INTO team_invites (code, team_id, created_by, created_at) VALUES ($1, $2, $3, $4)",
        code,
        team_id,
        user_id,
        now,
    )


async def use_invite(conn: Connection, code: str) -> None:
    """A team code is good once: used, it is gone."""
    await conn.execute("DELETE FROM team_invites WHERE code = $1", code)


async def live_invites(db: Executor, team_id: int, user_id: int) -> int:
    """The unused codes the user minted for the team (a code is deleted once used)."""
    count: int = await db.fetchval(
        "SELECT count(*) FROM team_invites WHERE team_id = $1 AND created_by = $2",
        team_id,
        user_id,
    )
    return count


async def invite_target(db: Executor, code: str) -> tuple[int, int] | None:
    """(team id, leaderboard id) of a live invite code."""
    row = await db.fetchrow(
        "SELECT t.id, t.leaderboard_id FROM team_invites i JOIN teams t ON t.id = i.team_id"
        " WHERE i.code = $1",
        code,
    )
    return None if row is None else (row["id"], row["leaderboard_id"])


async def member_ids(db: Executor, leaderboard_id: int, user_id: int) -> list[int]:
    """The user's team-mates on the leaderboard, the user included; only the user when in no
    team."""
    rows = await db.fetch(
        """
        SELECT m.user_id FROM team_members m
        WHERE m.team_id = (SELECT team_id FROM team_members
                           WHERE leaderboard_id = $1 AND user_id = $2)
        """,
        leaderboard_id,
        user_id,
    )
    return [r["user_id"] for r in rows] or [user_id]


async def set_team_rules(
    db: Executor, leaderboard_id: int, *, size: int | None, quotas: bool | None
) -> None:
    """The leaderboard's largest team and whether quotas count per team; None keeps one."""
    await db.execute(
        "UPDATE leaderboards SET team_size = coalesce($2, team_size),"
        " team_quotas = coalesce($3, team_quotas) WHERE id = $1",
        leaderboard_id,
        size,
        quotas,
    )
