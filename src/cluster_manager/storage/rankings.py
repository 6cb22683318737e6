"""The rankings as front ends read them: one entry per team, or per user in none, holding the
best of its members' ranking rows (`rankings` stays per user; `record_run` writes it).

A ranking reads the teams as they stood at its time: the competition's at the leaderboard's
deadline (for a board still open, the teams of now), the ranking of the runs after the deadline
the teams of now. A team made, joined, left or disbanded after the deadline changes nothing of
the final standings: they are what the deadline saw, by the query itself.

Banned users' rows count for nobody. A ranking is read as a prefix of its rows in score order,
a scan of `rankings_order` that stops early, and its entries are taken from that prefix: an
entry's best row is its first. Grouping every row by entry before ordering (as teams were
first ranked) read and sorted the whole board on every call: ten times slower on a season's
10,000 users (docs/PERFORMANCE.md, ranking_p95_ms).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from cluster_manager.core.records import RankingEntry
from cluster_manager.storage.controls import NOT_BANNED_R
from cluster_manager.storage.database import Executor
from cluster_manager.storage.teams import held_at

# When the teams of ranking $3 (after the deadline or not) of leaderboard $1 are read: at the
# deadline for the competition's (computed once per query), now (infinity) for the other.
_TEAMS_AT = """(SELECT CASE WHEN $3 THEN 'infinity'::timestamptz ELSE l.deadline END
              FROM leaderboards l WHERE l.id = $1)"""
# Membership rows `m` (and in `rank_of`, a team-mate's `o`) held at that time.
_MEMBER = held_at("m", _TEAMS_AT)
_MATE = held_at("o", _TEAMS_AT)

# $1 leaderboard, $2 GPU, $3 which ranking (after the deadline or not), $4 rows to read.
_ROWS = f"""
    SELECT coalesce(m.team_id, -r.user_id) AS entry, r.score, r.submission_id, r.submitted_at,
           t.name AS team, u.external_id AS user_name, u.name
    FROM rankings r
    JOIN users u ON u.id = r.user_id
    LEFT JOIN team_members m ON m.leaderboard_id = r.leaderboard_id AND m.user_id = r.user_id
                            AND {_MEMBER}
    LEFT JOIN teams t ON t.id = m.team_id
    WHERE r.leaderboard_id = $1 AND r.gpu = $2 AND r.after_deadline = $3 AND {NOT_BANNED_R}
    ORDER BY r.score, r.submitted_at, r.submission_id
    LIMIT $4
"""
# A fifth of a season's users in teams of three leave about one row in eight out; reading half
# as many rows again as entries wanted seldom needs a second read.
_SLACK = 1.5
_MIN_READ = 16


def entries_of(rows: Sequence[asyncpg.Record]) -> list[tuple[int, asyncpg.Record]]:
    """(rank, row) of each entry in a prefix of the ranking's rows: the entry's first row,
    ranked as SQL's `rank()` over the score (equal scores share a rank)."""
    seen: set[int] = set()
    entries: list[tuple[int, asyncpg.Record]] = []
    rank, last = 0, None
    for row in rows:
        entry, score = row[0], row[1]  # by position: a name lookup per row costs more
        if entry in seen:
            continue
        seen.add(entry)
        if score != last:
            rank, last = len(entries) + 1, score
        entries.append((rank, row))
    return entries


def _entry(rank: int, row: asyncpg.Record) -> RankingEntry:
    return RankingEntry(
        rank,
        row["user_name"],
        row["score"],
        row["submission_id"],
        row["submitted_at"],
        row["name"],
        row["team"],
    )


async def ranking(
    db: Executor,
    *,
    leaderboard_id: int,
    gpu: str,
    limit: int = 100,
    offset: int = 0,
    after_deadline: bool = False,
) -> list[RankingEntry]:
    """Best score per user, or per team for its members, in the competition's ranking (teams
    as at the deadline) or in that of runs after the deadline (teams as now); equal scores
    share a rank, the earlier submission listed first."""
    wanted = offset + limit
    read = max(_MIN_READ, int(wanted * _SLACK))
    while True:
        rows = await db.fetch(_ROWS, leaderboard_id, gpu, after_deadline, read)
        entries = entries_of(rows)
        # The prefix's first entries are the ranking's first: enough of them, or every row.
        if len(entries) >= wanted or len(rows) < read:
            return [_entry(rank, row) for rank, row in entries[offset:wanted]]
        read *= 2


async def rank_of(
    db: Executor, *, leaderboard_id: int, gpu: str, user_id: int, after_deadline: bool = False
) -> tuple[int, float, int] | None:
    """(rank, best score, submission id) of one user's entry (their team's, when in one) on
    one GPU, if ranked (in the competition's ranking, or in that of runs after the deadline;
    the team as that ranking reads it): its rank is one more than the entries with a row
    scoring better."""
    row = await db.fetchrow(
        f"""
        WITH members AS (
            SELECT o.user_id FROM team_members m
            JOIN team_members o ON o.team_id = m.team_id AND {_MATE}
            WHERE m.leaderboard_id = $1 AND m.user_id = $4 AND {_MEMBER}
            UNION SELECT $4
        ),
        best AS (
            SELECT r.score, r.submission_id FROM rankings r
            WHERE r.leaderboard_id = $1 AND r.gpu = $2 AND r.after_deadline = $3
              AND r.user_id IN (SELECT user_id FROM members) AND {NOT_BANNED_R}
            ORDER BY r.score, r.submitted_at, r.submission_id
            LIMIT 1
        )
        SELECT (SELECT count(DISTINCT coalesce(m.team_id, -r.user_id)) + 1
                FROM rankings r
                LEFT JOIN team_members m
                       ON m.leaderboard_id = r.leaderboard_id AND m.user_id = r.user_id
                      AND {_MEMBER}
                WHERE r.leaderboard_id = $1 AND r.gpu = $2 AND r.after_deadline = $3
                  AND r.score < best.score AND {NOT_BANNED_R}) AS rank,
               best.score, best.submission_id
        FROM best
        """,
        leaderboard_id,
        gpu,
        after_deadline,
        user_id,
    )
    return None if row is None else (row["rank"], row["score"], row["submission_id"])
