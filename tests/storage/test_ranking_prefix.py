"""The ranking read as a prefix of its rows in score order (storage/rankings.py) gives what
ranking every entry would: a team's members as one entry with their best row, banned users'
rows counting for nobody, equal scores sharing a rank, at every page, even where a large team
fills the first prefix read and a second, longer one is needed."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import asyncpg

from cluster_manager.storage import rankings
from tests.storage.helpers import make_board

EPOCH = datetime(2030, 1, 1, tzinfo=UTC)
Row = tuple[int, int | None, float, datetime, int]  # user, team, score, submitted, submission


async def season(pool: asyncpg.Pool, board_id: int) -> list[Row]:
    """60 users: a team of 20 holding the best scores, teams of 3, loners; equal scores; one
    banned user. Inserted row by row (the foreign keys hold); the rows, bans left out."""
    rng = random.Random(43)
    teams: dict[int, int] = {u: 1 for u in range(1, 21)}
    teams |= {u: 2 + (u - 21) // 3 for u in range(21, 33)}
    banned = 40
    rows: list[Row] = []
    async with pool.acquire() as conn, conn.transaction():
        ids = {}
        for user in range(1, 61):
            ids[user] = await conn.fetchval(
                "INSERT INTO users (external_id, name) VALUES ($1, $1) RETURNING id", f"u{user}"
            )
        code = await conn.fetchval(
            "INSERT INTO code_files (sha256, code) VALUES ('x', 'x') RETURNING id"
        )
        team_ids = {}
        for team in sorted(set(teams.values())):
            creator = ids[min(u for u, t in teams.items() if t == team)]
            team_ids[team] = await conn.fetchval(
                "INSERT INTO teams (leaderboard_id, name, created_by, created_at)"
                " VALUES ($1, $2, $3, $4) RETURNING id",
                board_id,
                f"team{team}",
                creator,
                EPOCH,
            )
        for user, team in teams.items():
            await conn.execute(
                "INSERT INTO team_members VALUES ($1, $2, $3, $4)",
                board_id,
                ids[user],
                team_ids[team],
                EPOCH,
            )
        await conn.execute(
            "INSERT INTO user_bans VALUES ($1, 'test', 'test', $2)", ids[banned], EPOCH
        )
        for user in range(1, 61):
            score = rng.choice([0.5, 1.0, 1.5]) if user <= 20 else rng.choice([2.0, 3.0, 4.0])
            at = EPOCH + timedelta(seconds=rng.randrange(1000))
            sid = await conn.fetchval(
                "INSERT INTO submissions (leaderboard_id, user_id, file_name, code_id, mode,"
                " submitted_at) VALUES ($1, $2, 's.py', $3, 'leaderboard', $4) RETURNING id",
                board_id,
                ids[user],
                code,
                at,
            )
            await conn.execute(
                "INSERT INTO rankings (leaderboard_id, gpu, user_id, submission_id, score,"
                " submitted_at) VALUES ($1, 'CPU', $2, $3, $4, $5)",
                board_id,
                ids[user],
                sid,
                score,
                at,
            )
            if user != banned:
                team = team_ids.get(teams.get(user, 0))
                rows.append((user, team, score, at, sid))
    return rows


def expected(rows: list[Row]) -> list[tuple[int, str, float, int]]:
    """(rank, user, score, submission) of every entry, ranked the long way."""
    best: dict[int, Row] = {}
    for row in sorted(rows, key=lambda r: (r[2], r[3], r[4])):
        best.setdefault(row[1] if row[1] is not None else -row[0], row)
    entries = sorted(best.values(), key=lambda r: (r[2], r[3], r[4]))
    return [
        (1 + sum(e[2] < row[2] for e in entries), f"u{row[0]}", row[2], row[4]) for row in entries
    ]


async def test_every_page_of_the_ranking_is_what_ranking_every_entry_gives(service, pool):
    board = await make_board(service)
    want = expected(await season(pool, board.id))
    assert len(want) == 1 + 4 + 27  # the big team, the teams of three, the loners less one
    for limit, offset in ((1, 0), (2, 0), (5, 3), (100, 0), (10, 25), (10, 40)):
        got = await rankings.ranking(
            pool, leaderboard_id=board.id, gpu="CPU", limit=limit, offset=offset
        )
        assert [(e.rank, e.user, e.score, e.submission_id) for e in got] == want[
            offset : offset + limit
        ]


async def test_each_users_rank_is_their_entrys(service, pool):
    board = await make_board(service)
    rows = await season(pool, board.id)
    want = {user: (rank, score, sid) for rank, user, score, sid in expected(rows)}
    team_of = {r[0]: r[1] for r in rows}
    for user in (1, 7, 20, 21, 23, 33, 59):
        # The entry is held by the best of the user's team (or the user alone).
        mates = [r for r in rows if r[0] == user or (r[1] is not None and r[1] == team_of[user])]
        holder = min(mates, key=lambda r: (r[2], r[3], r[4]))[0]
        found = await rankings.rank_of(
            pool, leaderboard_id=board.id, gpu="CPU", user_id=await user_id(pool, user)
        )
        assert found == want[f"u{holder}"], user
    banned = await user_id(pool, 40)
    assert await rankings.rank_of(pool, leaderboard_id=board.id, gpu="CPU", user_id=banned) is None


async def user_id(pool: asyncpg.Pool, user: int) -> int:
    found: int = await pool.fetchval("SELECT id FROM users WHERE external_id = $1", f"u{user}")
    return found
