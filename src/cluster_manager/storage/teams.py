"""Teams, their members and invite codes; a user is in at most one team per leaderboard at a
time. Nothing of a team's past is deleted: a member who leaves keeps their row with `left_at`
and a team left empty keeps its own with `disbanded_at`, so that a ranking can read the teams
as they stood at any time (`held_at`), its deadline's above all (storage.rankings)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cluster_manager.core.teams import Team
from cluster_manager.storage.database import Connection, Executor


def held_at(member: str, at: str) -> str:
    """SQL: the membership row `member` was held at the time `at` (an SQL expression; infinity
    for now). A membership runs from `joined_at` up to, not including, `left_at`."""
    return f"{member}.joined_at <= {at} AND ({member}.left_at IS NULL OR {member}.left_at > {at})"


_SELECT_TEAM = """
    SELECT t.id, t.name, t.created_at, l.name AS leaderboard, l.team_size,
           ARRAY(SELECT u.external_id FROM team_members m JOIN users u ON u.id = m.user_id
                 WHERE m.team_id = t.id AND m.left_at IS NULL
                 ORDER BY m.joined_at, u.external_id) AS members
    FROM teams t JOIN leaderboards l ON l.id = t.leaderboard_id
"""
# The membership a user holds now.
_CURRENT = "leaderboard_id = $1 AND user_id = $2 AND left_at IS NULL"


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
        f"SELECT team_id FROM team_members WHERE {_CURRENT}",
        leaderboard_id,
        user_id,
    )
    return found


async def team_of(db: Executor, leaderboard_id: int, user_id: int) -> Team | None:
    row = await db.fetchrow(
        _SELECT_TEAM + f" WHERE t.id = (SELECT team_id FROM team_members WHERE {_CURRENT})",
        leaderboard_id,
        user_id,
    )
    return None if row is None else _team(row)


async def team_by_id(db: Executor, team_id: int) -> Team | None:
    row = await db.fetchrow(_SELECT_TEAM + " WHERE t.id = $1", team_id)
    return None if row is None else _team(row)


async def teams_of_board(db: Executor, leaderboard_id: int) -> list[Team]:
    rows = await db.fetch(
        _SELECT_TEAM + " WHERE t.leaderboard_id = $1 AND t.disbanded_at IS NULL ORDER BY t.name",
        leaderboard_id,
    )
    return [_team(r) for r in rows]


async def count_teams(db: Executor, leaderboard_id: int) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM teams WHERE leaderboard_id = $1 AND disbanded_at IS NULL",
        leaderboard_id,
    )
    return count


async def name_taken(db: Executor, leaderboard_id: int, name: str) -> bool:
    """Team names are told apart without case: 'Fast' and 'fast' would read as one. A
    disbanded team's name is free again (the final standings may still show it)."""
    taken: bool = await db.fetchval(
        "SELECT EXISTS (SELECT 1 FROM teams WHERE leaderboard_id = $1 AND lower(name) = lower($2)"
        " AND disbanded_at IS NULL)",
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
    """The user joins the team. Their memberships on a leaderboard never overlap, even where
    the clock stepped back since they last left: one team at any time, in any ranking."""
    await conn.execute(
        """
        INSERT INTO team_members (leaderboard_id, user_id, team_id, joined_at)
        SELECT $1, $2, $3, greatest($4, max(left_at)) FROM team_members
        WHERE leaderboard_id = $1 AND user_id = $2
        """,
        leaderboard_id,
        user_id,
        team_id,
        now,
    )


async def member_count(db: Executor, team_id: int) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM team_members WHERE team_id = $1 AND left_at IS NULL", team_id
    )
    return count


async def remove_member(
    conn: Connection, leaderboard_id: int, user_id: int, now: datetime
) -> int | None:
    """Ends the user's membership of their team on the leaderboard, and disbands a team left
    empty; the team's id, or None when they were in none. Both rows stay, with when: the
    rankings read the teams as they stood at their deadline."""
    team_id: int | None = await conn.fetchval(
        "UPDATE team_members SET left_at = greatest($3, joined_at)"
        " WHERE leaderboard_id = $1 AND user_id = $2 AND left_at IS NULL RETURNING team_id",
        leaderboard_id,
        user_id,
        now,
    )
    if team_id is None:
        return None
    # A code speaks for its minter's membership: it goes when they do.
    await conn.execute(
        "DELETE FROM team_invites WHERE team_id = $1 AND created_by = $2", team_id, user_id
    )
    if await member_count(conn, team_id) == 0:
        await conn.execute(
            "UPDATE teams SET disbanded_at = greatest($2, created_at) WHERE id = $1", team_id, now
        )
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
    """(team id, leaderboard id) of a live invite code: unused, and its minter still a member
    of its team (a code speaks for them)."""
    row = await db.fetchrow(
        """
        SELECT t.id, t.leaderboard_id FROM team_invites i
        JOIN teams t ON t.id = i.team_id
        JOIN team_members m ON m.team_id = i.team_id AND m.user_id = i.created_by
                           AND m.left_at IS NULL
        WHERE i.code = $1
        """,
        code,
    )
    return None if row is None else (row["id"], row["leaderboard_id"])


async def member_ids(db: Executor, leaderboard_id: int, user_id: int) -> list[int]:
    """The user's team-mates on the leaderboard now, the user included; only the user when in
    no team."""
    rows = await db.fetch(
        f"""
        SELECT m.user_id FROM team_members m
        WHERE m.team_id = (SELECT team_id FROM team_members WHERE {_CURRENT})
          AND m.left_at IS NULL
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
