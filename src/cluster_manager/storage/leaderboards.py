"""Users, leaderboards, their GPU types and templates."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cluster_manager.core.models import Task
from cluster_manager.core.records import Leaderboard, LeaderboardSummary, User
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
        task.to_json(),
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


_SELECT_LEADERBOARD = """
    SELECT l.id, l.name, l.deadline, l.description, l.task, l.created_at,
           l.rate_limit_per_hour, u.external_id AS creator,
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
    )


async def get_leaderboard(db: Executor, name: str) -> Leaderboard | None:
    row = await db.fetchrow(_SELECT_LEADERBOARD + " WHERE l.name = $1", name)
    return None if row is None else _leaderboard(row)


async def get_leaderboard_by_id(db: Executor, leaderboard_id: int) -> Leaderboard | None:
    row = await db.fetchrow(_SELECT_LEADERBOARD + " WHERE l.id = $1", leaderboard_id)
    return None if row is None else _leaderboard(row)


async def secret_seed(db: Executor, leaderboard_id: int) -> int:
    seed = await db.fetchval("SELECT secret_seed FROM leaderboards WHERE id = $1", leaderboard_id)
    return int(seed)


async def list_leaderboards(db: Executor) -> list[LeaderboardSummary]:
    rows = await db.fetch(
        """
        SELECT l.name, l.deadline,
               ARRAY(SELECT gpu FROM leaderboard_gpus g WHERE g.leaderboard_id = l.id
                     ORDER BY gpu) AS gpus,
               (SELECT count(*) FROM submissions s WHERE s.leaderboard_id = l.id) AS submissions
        FROM leaderboards l
        ORDER BY l.deadline, l.name
        """
    )
    return [
        LeaderboardSummary(r["name"], r["deadline"], tuple(r["gpus"]), r["submissions"])
        for r in rows
    ]


async def leaderboard_names(db: Executor, prefix: str = "", limit: int = 25) -> list[str]:
    rows = await db.fetch(
        "SELECT name FROM leaderboards WHERE name LIKE $1 || '%' ORDER BY name LIMIT $2",
        prefix.replace("%", r"\%").replace("_", r"\_"),
        limit,
    )
    return [r["name"] for r in rows]


async def delete_leaderboard(conn: Connection, leaderboard_id: int) -> None:
    """Removes the leaderboard and, by cascade, its submissions, jobs, runs and rankings."""
    await conn.execute("DELETE FROM leaderboards WHERE id = $1", leaderboard_id)
