"""A busy season's database for the ranking benchmarks: drawn once, bulk-loaded, checked.

10,000 users, 50,000 distinct code files, 500,000 ranked submissions spread over the given
leaderboards and GPUs, and for each its public run and secret re-run: 1,000,000 jobs and
1,000,000 runs, loaded with `copy_records_to_table`. One in ten secret re-runs fails; the
rankings hold each user's best public score among the submissions whose pair both passed, per
leaderboard, GPU and side of the deadline, as `record_run` would have left them.

What a season holds besides: the last twentieth of the submissions came after the deadline
(ranked on their own, never in the competition's history), and on each leaderboard one user in
five is in a team of two to four. Foreign keys are not re-checked row by row during the load
(the rows are consistent by construction; a few anti-joins check that afterwards). Run results
are small JSON documents, not full logs.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

USERS = 10_000
CODE_FILES = 50_000
SUBMISSIONS = 500_000  # two runs each: 1,000,000 runs
SECRET_FAILS_ONE_IN = 10
# The season's tail after the deadline, and how many users join teams (of 2-4) per board.
AFTER_DEADLINE_ONE_IN = 20
TEAMED_ONE_IN = 5
TEAM_SIZES = (2, 4)
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)
RESULT = json.dumps({"version": 1, "passed": True, "verdict": "passed", "phases": []})
FAILED_RESULT = json.dumps({"version": 1, "passed": False, "verdict": "wrong_answer"})
SYSTEM = json.dumps({"device": "H100", "cpu": "bench"})

Best = dict[tuple[int, str, int, bool], tuple[float, datetime, int]]


def users(count: int = USERS) -> Iterator[tuple[Any, ...]]:
    for uid in range(1, count + 1):
        yield uid, str(100_000_000 + uid), f"user{uid}"


def code_files(count: int = CODE_FILES) -> Iterator[tuple[Any, ...]]:
    for cid in range(1, count + 1):
        code = f"def custom_kernel(data):\n    return data.clone()  # v{cid}\n"
        yield cid, hashlib.sha256(code.encode()).hexdigest(), code


class Season:
    """Submissions, jobs, runs and teams drawn once, with the rankings they imply."""

    def __init__(
        self,
        board_ids: Sequence[int],
        gpus: Sequence[str],
        *,
        submissions: int = SUBMISSIONS,
        user_count: int = USERS,
        code_count: int = CODE_FILES,
        seed: int = 7,
    ) -> None:
        rng = random.Random(seed)
        self.user_count, self.code_count = user_count, code_count
        deadline_sid = submissions - submissions // AFTER_DEADLINE_ONE_IN
        self.rows = [
            (
                sid,
                rng.choice(board_ids),
                rng.randint(1, user_count),
                rng.randint(1, code_count),
                rng.choice(gpus),
                EPOCH + timedelta(seconds=sid * 5),
                rng.lognormvariate(-7, 0.5),
                rng.randrange(SECRET_FAILS_ONE_IN) != 0,
                sid > deadline_sid,
            )
            for sid in range(1, submissions + 1)
        ]
        self.members = self._draw_teams(rng, board_ids)

    def _draw_teams(self, rng: random.Random, board_ids: Sequence[int]) -> list[tuple[int, ...]]:
        """(leaderboard, user, team) per member: a fifth of the users of each board, in teams."""
        members = []
        team = 0
        for board in board_ids:
            chosen = rng.sample(range(1, self.user_count + 1), self.user_count // TEAMED_ONE_IN)
            while chosen:
                team += 1
                size = rng.randint(*TEAM_SIZES)
                members += [(board, user, team) for user in chosen[:size]]
                del chosen[:size]
        return members

    def submissions(self) -> Iterator[tuple[Any, ...]]:
        for sid, board, user, code, _gpu, at, _score, _ok, late in self.rows:
            yield sid, board, user, "submission.py", code, "leaderboard", at, late

    def jobs(self) -> Iterator[tuple[Any, ...]]:
        for sid, _board, _user, _code, gpu, at, _score, _ok, _late in self.rows:
            done = at + timedelta(seconds=3)
            for secret in (False, True):
                jid = sid * 2 - 1 + secret
                external = f"job-{jid}-attempt-1"
                yield (
                    jid,
                    sid,
                    gpu,
                    "leaderboard",
                    secret,
                    "finished",
                    "local",
                    external,
                    1,
                    at,
                    at,
                    done,
                )

    def runs(self) -> Iterator[tuple[Any, ...]]:
        for sid, board, user, _code, gpu, at, score, ok, _late in self.rows:
            for secret in (False, True):
                jid = sid * 2 - 1 + secret
                passed = ok or not secret
                verdict = "passed" if passed else "wrong_answer"
                result = RESULT if passed else FAILED_RESULT
                done = at + timedelta(seconds=3)
                yield (
                    jid,
                    jid,
                    sid,
                    board,
                    user,
                    gpu,
                    "leaderboard",
                    secret,
                    passed,
                    verdict,
                    score,
                    result,
                    SYSTEM,
                    done,
                )

    def _best(self) -> Iterator[tuple[tuple[int, str, int, bool], float, datetime, int, bool]]:
        """Each submission whose pair passed, with whether it improved its user's best (per
        leaderboard, GPU and side of the deadline), in time order."""
        best: dict[tuple[int, str, int, bool], float] = {}
        for sid, board, user, _code, gpu, at, score, ok, late in self.rows:
            key = (board, gpu, user, late)
            if ok:
                improved = key not in best or score < best[key]
                if improved:
                    best[key] = score
                yield key, score, at, sid, improved

    def rankings(self) -> Iterator[tuple[Any, ...]]:
        best: Best = {}
        for key, score, at, sid, improved in self._best():
            if improved:
                best[key] = (score, at, sid)
        for (board, gpu, user, late), (score, at, sid) in best.items():
            yield board, gpu, user, sid, score, at, late

    def ranking_events(self) -> Iterator[tuple[Any, ...]]:
        """Each improvement of a user's best in the competition (runs after the deadline
        never enter its history), oldest first."""
        for (board, gpu, user, late), score, at, sid, improved in self._best():
            if improved and not late:
                yield board, gpu, user, sid, score, at + timedelta(seconds=3)

    def teams(self) -> Iterator[tuple[Any, ...]]:
        seen: set[int] = set()
        for board, user, team in self.members:
            if team not in seen:
                seen.add(team)
                yield team, board, f"team{team}", user, EPOCH

    def team_members(self) -> Iterator[tuple[Any, ...]]:
        for board, user, team in self.members:
            yield board, user, team, EPOCH


SUBMISSION_COLUMNS = (
    "id",
    "leaderboard_id",
    "user_id",
    "file_name",
    "code_id",
    "mode",
    "submitted_at",
    "after_deadline",
)
JOB_COLUMNS = (
    "id",
    "submission_id",
    "gpu",
    "mode",
    "secret",
    "state",
    "launcher",
    "external_id",
    "attempts",
    "created_at",
    "claimed_at",
    "finished_at",
)
RUN_COLUMNS = (
    "id",
    "job_id",
    "submission_id",
    "leaderboard_id",
    "user_id",
    "gpu",
    "mode",
    "secret",
    "passed",
    "verdict",
    "score",
    "result",
    "system",
    "created_at",
)
RANKING_COLUMNS = (
    "leaderboard_id",
    "gpu",
    "user_id",
    "submission_id",
    "score",
    "submitted_at",
    "after_deadline",
)
EVENT_COLUMNS = ("leaderboard_id", "gpu", "user_id", "submission_id", "score", "ranked_at")
TEAM_COLUMNS = ("id", "leaderboard_id", "name", "created_by", "created_at")
MEMBER_COLUMNS = ("leaderboard_id", "user_id", "team_id", "joined_at")
SERIAL_TABLES = ("users", "code_files", "submissions", "jobs", "runs", "ranking_events", "teams")


async def copy(conn: asyncpg.Connection, table: str, columns: tuple[str, ...], rows: Any) -> float:
    began = time.perf_counter()
    await conn.copy_records_to_table(table, records=rows, columns=columns)
    return time.perf_counter() - began


async def load(url: str, season: Season) -> dict[str, float]:
    """Bulk-loads the season; returns the seconds spent per table (and in total)."""
    began = time.perf_counter()
    seconds = {}
    conn = await asyncpg.connect(url)
    try:
        # Consistent by construction: skip the row-by-row foreign key triggers.
        await conn.execute("SET session_replication_role = replica")
        tables = (
            ("users", ("id", "external_id", "name"), users(season.user_count)),
            ("code_files", ("id", "sha256", "code"), code_files(season.code_count)),
            ("submissions", SUBMISSION_COLUMNS, season.submissions()),
            ("jobs", JOB_COLUMNS, season.jobs()),
            ("runs", RUN_COLUMNS, season.runs()),
            ("rankings", RANKING_COLUMNS, season.rankings()),
            ("ranking_events", EVENT_COLUMNS, season.ranking_events()),
            ("teams", TEAM_COLUMNS, season.teams()),
            ("team_members", MEMBER_COLUMNS, season.team_members()),
        )
        for table, columns, rows in tables:
            seconds[table] = await copy(conn, table, columns, rows)
        await conn.execute("SET session_replication_role = origin")
        for table in SERIAL_TABLES:
            await conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}"
            )
        analyze = time.perf_counter()
        await conn.execute("VACUUM ANALYZE")
        seconds["vacuum_analyze"] = time.perf_counter() - analyze
    finally:
        await conn.close()
    seconds["total"] = time.perf_counter() - began
    return {k: round(v, 2) for k, v in seconds.items()}


ORPHAN_CHECKS = {
    "runs_without_job": "SELECT count(*) FROM runs r LEFT JOIN jobs j ON j.id = r.job_id "
    "WHERE j.id IS NULL",
    "jobs_without_submission": "SELECT count(*) FROM jobs j LEFT JOIN submissions s "
    "ON s.id = j.submission_id WHERE s.id IS NULL",
    "submissions_without_code": "SELECT count(*) FROM submissions s LEFT JOIN code_files c "
    "ON c.id = s.code_id WHERE c.id IS NULL",
    "rankings_without_user": "SELECT count(*) FROM rankings r LEFT JOIN users u "
    "ON u.id = r.user_id WHERE u.id IS NULL",
    "members_without_team": "SELECT count(*) FROM team_members m LEFT JOIN teams t "
    "ON t.id = m.team_id WHERE t.id IS NULL",
}
COUNTED = ("users", "code_files", "submissions", "jobs", "runs", "rankings", "ranking_events")


async def check(pool: asyncpg.Pool) -> dict[str, int]:
    """Row counts per table (teams and after-deadline rows too); raises on an orphan."""
    counts = {t: await pool.fetchval(f"SELECT count(*) FROM {t}") for t in COUNTED}
    counts["rankings_after_deadline"] = await pool.fetchval(
        "SELECT count(*) FROM rankings WHERE after_deadline"
    )
    counts["teams"] = await pool.fetchval("SELECT count(*) FROM teams")
    counts["team_members"] = await pool.fetchval("SELECT count(*) FROM team_members")
    orphans = {name: await pool.fetchval(sql) for name, sql in ORPHAN_CHECKS.items()}
    if any(orphans.values()):
        raise RuntimeError(f"the loaded data is inconsistent: {orphans}")
    return counts
