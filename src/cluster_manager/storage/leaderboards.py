"""Users, leaderboards, their GPU types and templates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from cluster_manager.core.models import Task
from cluster_manager.core.records import ChannelPolicy, Leaderboard, LeaderboardSummary, User
from cluster_manager.storage.database import Connection, Executor


async def upsert_user(db: Executor, external_id: str, name: str) -> User:
    row = await db.fetchrow(
        """
        INSERT INTO users (external_id, name) VALUES ($1, $2)
        ON CONFLICT (external_id) DO UPDATE SET name = EXCLUDED.name
        RETURNING id, external_id, name
        """,
        external_id,
        name,
    )
    assert row is not None
    return User(row["id"], row["external_id"], row["name"])


async def get_user(db: Executor, external_id: str) -> User | None:
    row = await db.fetchrow(
        "SELECT id, external_id, name FROM users WHERE external_id = $1", external_id
    )
    return None if row is None else User(row["id"], row["external_id"], row["name"])


async def insert_leaderboard(
    conn: Connection,
    *,
    name: str,
    deadline: datetime,
    task: Task,
    gpus: tuple[str, ...],
    creator_id: int | None,
    secret_seed: int,
    rate_limit_per_hour: int | None,
) -> int | None:
    """Inserts the leaderboard, its GPUs and templates; None if the name is taken."""
    leaderboard_id = await conn.fetchval(
        """
        INSERT INTO leaderboards
            (name, deadline, description, task, creator_id, secret_seed, rate_limit_per_hour)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (name) DO NOTHING
        RETURNING id
        """,
        name,
        deadline,
        task.description,
        task.to_stored_json(),
        creator_id,
        secret_seed,
        rate_limit_per_hour,
    )
    if leaderboard_id is None:
        return None
    await conn.executemany(
        "INSERT INTO leaderboard_gpus (leaderboard_id, gpu) VALUES ($1, $2)",
        [(leaderboard_id, gpu) for gpu in gpus],
    )
    await conn.executemany(
        "INSERT INTO templates (leaderboard_id, language, code) VALUES ($1, $2, $3)",
        [(leaderboard_id, lang, code) for lang, code in task.templates.items()],
    )
    return int(leaderboard_id)


async def update_leaderboard(
    conn: Connection,
    leaderboard_id: int,
    *,
    deadline: datetime,
    task: Task,
    gpus: tuple[str, ...],
) -> None:
    """Replaces the leaderboard's deadline, task, GPU types and templates (a problem set's
    newer version). Call in a transaction."""
    await conn.execute(
        "UPDATE leaderboards SET deadline = $2, description = $3, task = $4,"
        " history_version = history_version + 1 WHERE id = $1",
        leaderboard_id,
        deadline,
        task.description,
        task.to_stored_json(),
    )
    await conn.execute("DELETE FROM leaderboard_gpus WHERE leaderboard_id = $1", leaderboard_id)
    await conn.executemany(
        "INSERT INTO leaderboard_gpus (leaderboard_id, gpu) VALUES ($1, $2)",
        [(leaderboard_id, gpu) for gpu in gpus],
    )
    await conn.execute("DELETE FROM templates WHERE leaderboard_id = $1", leaderboard_id)
    await conn.executemany(
        "INSERT INTO templates (leaderboard_id, language, code) VALUES ($1, $2, $3)",
        [(leaderboard_id, lang, code) for lang, code in task.templates.items()],
    )


_SELECT_LEADERBOARD = """
    SELECT l.id, l.name, l.deadline, l.description, l.task, l.created_at,
           l.rate_limit_per_hour, l.closed, l.channel_policy, l.after_deadline_runs, l.team_size,
           l.team_quotas,
           u.external_id AS creator,
           ARRAY(SELECT gpu FROM leaderboard_gpus g WHERE g.leaderboard_id = l.id ORDER BY gpu)
               AS gpus
    FROM leaderboards l LEFT JOIN users u ON u.id = l.creator_id
"""


def _leaderboard(row: asyncpg.Record) -> Leaderboard:
    return Leaderboard(
        id=row["id"],
        name=row["name"],
        deadline=row["deadline"],
        description=row["description"],
        task=Task.from_json(row["task"]),
        gpus=tuple(row["gpus"]),
        creator=row["creator"],
        created_at=row["created_at"],
        rate_limit_per_hour=row["rate_limit_per_hour"],
        closed=row["closed"],
        channel_policy=ChannelPolicy(row["channel_policy"]),
        after_deadline_runs=row["after_deadline_runs"],
        team_size=row["team_size"],
        team_quotas=row["team_quotas"],
    )


async def get_leaderboard(db: Executor, name: str) -> Leaderboard | None:
    row = await db.fetchrow(_SELECT_LEADERBOARD + " WHERE l.name = $1", name)
    return None if row is None else _leaderboard(row)


async def get_leaderboard_by_id(db: Executor, leaderboard_id: int) -> Leaderboard | None:
    row = await db.fetchrow(_SELECT_LEADERBOARD + " WHERE l.id = $1", leaderboard_id)
    return None if row is None else _leaderboard(row)


@dataclass(frozen=True)
class ChannelPolicySetting:
    """A leaderboard's channel policy as an organiser set it (`admin status`)."""

    leaderboard: str
    policy: ChannelPolicy
    set_by: str
    set_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "leaderboard": self.leaderboard,
            "policy": self.policy.value,
            "set_by": self.set_by,
            "set_at": self.set_at.isoformat(),
        }


async def set_channel_policy(
    db: Executor, leaderboard_id: int, policy: ChannelPolicy, by: str, now: datetime
) -> None:
    await db.execute(
        "UPDATE leaderboards SET channel_policy = $2, channel_policy_set_by = $3,"
        " channel_policy_set_at = $4 WHERE id = $1",
        leaderboard_id,
        policy.value,
        by,
        now,
    )


@dataclass(frozen=True)
class AfterDeadlineRefusal:
    """A leaderboard whose organisers take no runs after its deadline (`admin status`)."""

    leaderboard: str
    set_by: str
    set_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "leaderboard": self.leaderboard,
            "set_by": self.set_by,
            "set_at": None if self.set_at is None else self.set_at.isoformat(),
        }


async def after_deadline_refusals(db: Executor) -> list[AfterDeadlineRefusal]:
    """The leaderboards that take no runs after their deadline (taking them is the default),
    by name."""
    rows = await db.fetch(
        """
        SELECT name, after_deadline_runs_set_by, after_deadline_runs_set_at
        FROM leaderboards WHERE NOT after_deadline_runs ORDER BY name
        """
    )
    return [
        AfterDeadlineRefusal(
            r["name"], r["after_deadline_runs_set_by"] or "", r["after_deadline_runs_set_at"]
        )
        for r in rows
    ]


async def set_after_deadline_runs(
    db: Executor, leaderboard_id: int, allowed: bool, by: str, now: datetime
) -> None:
    await db.execute(
        "UPDATE leaderboards SET after_deadline_runs = $2, after_deadline_runs_set_by = $3,"
        " after_deadline_runs_set_at = $4 WHERE id = $1",
        leaderboard_id,
        allowed,
        by,
        now,
    )


async def channel_policies(db: Executor) -> list[ChannelPolicySetting]:
    """The leaderboards whose channel policy is not the default, by name."""
    rows = await db.fetch(
        """
        SELECT name, channel_policy, channel_policy_set_by, channel_policy_set_at
        FROM leaderboards WHERE channel_policy <> $1 ORDER BY name
        """,
        ChannelPolicy.RANKED.value,
    )
    return [
        ChannelPolicySetting(
            r["name"],
            ChannelPolicy(r["channel_policy"]),
            r["channel_policy_set_by"] or "",
            r["channel_policy_set_at"],
        )
        for r in rows
    ]


async def secret_seed(db: Executor, leaderboard_id: int) -> int:
    seed = await db.fetchval("SELECT secret_seed FROM leaderboards WHERE id = $1", leaderboard_id)
    return int(seed)


# An invite-only (`closed`) leaderboard is visible to its members ($1: the viewer's external
# id, or NULL for nobody signed in) and, with $2, to everyone (admins, organisers on the
# server). Every listing and every route that reads one leaderboard for a viewer uses it.
VISIBLE_TO = """
    (NOT l.closed OR $2::boolean OR EXISTS (
        SELECT 1 FROM leaderboard_members m JOIN users mu ON mu.id = m.user_id
        WHERE m.leaderboard_id = l.id AND mu.external_id = $1::text))
"""


async def get_visible_leaderboard(
    db: Executor, name: str, viewer: str | None, include_closed: bool
) -> Leaderboard | None:
    """The leaderboard if `viewer` may see it (as `list_leaderboards` would list it)."""
    row = await db.fetchrow(
        f"{_SELECT_LEADERBOARD} WHERE l.name = $3 AND {VISIBLE_TO}", viewer, include_closed, name
    )
    return None if row is None else _leaderboard(row)


async def list_leaderboards(
    db: Executor, viewer: str | None, include_closed: bool
) -> list[LeaderboardSummary]:
    """Every leaderboard `viewer` (an external id) may see; all with `include_closed`."""
    rows = await db.fetch(
        f"""
        SELECT l.name, l.deadline, l.closed,
               ARRAY(SELECT gpu FROM leaderboard_gpus g WHERE g.leaderboard_id = l.id
                     ORDER BY gpu) AS gpus,
               (SELECT count(*) FROM submissions s WHERE s.leaderboard_id = l.id) AS submissions
        FROM leaderboards l
        WHERE {VISIBLE_TO}
        ORDER BY l.deadline, l.name
        """,
        viewer,
        include_closed,
    )
    return [
        LeaderboardSummary(
            r["name"], r["deadline"], tuple(r["gpus"]), r["submissions"], invite_only=r["closed"]
        )
        for r in rows
    ]


async def leaderboard_names(
    db: Executor,
    viewer: str | None,
    include_closed: bool,
    typed: str,
    now: datetime,
    *,
    submittable_only: bool = False,
    limit: int = 25,
) -> list[tuple[str, bool]]:
    """(name, whether it is open) of names holding `typed` anywhere (literally: no
    wildcards), open leaderboards first, then those that start with it, then by name; with
    `submittable_only`, those that take a submission now (open, or taking runs after their
    deadline)."""
    rows = await db.fetch(
        f"""
        SELECT l.name, l.deadline > $6 AS open FROM leaderboards l
        WHERE strpos(l.name, $3) > 0 AND {VISIBLE_TO}
              AND (NOT $5::boolean OR l.deadline > $6 OR l.after_deadline_runs)
        ORDER BY l.deadline <= $6, strpos(l.name, $3) <> 1, l.name
        LIMIT $4
        """,
        viewer,
        include_closed,
        typed,
        limit,
        submittable_only,
        now,
    )
    return [(r["name"], r["open"]) for r in rows]


async def delete_leaderboard(conn: Connection, leaderboard_id: int) -> None:
    """Removes the leaderboard and, by cascade, its submissions, jobs, runs and rankings."""
    await conn.execute("DELETE FROM leaderboards WHERE id = $1", leaderboard_id)
