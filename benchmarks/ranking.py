"""ranking_p95_ms and api_p95_ms: `leaderboard show` for one GPU on a database the size of a
busy season, through the service and through the HTTP API.

Two leaderboards (created through the service, each on two GPUs) get 10,000 users, 50,000
distinct code files, 500,000 ranked submissions, and for each its public run and secret re-run:
1,000,000 jobs and 1,000,000 runs, loaded with `copy_records_to_table`. One in ten secret
re-runs fails; the rankings hold each user's best public score among the submissions whose
pair both passed, per leaderboard and GPU, as `record_run` would have left them. Foreign keys
are not re-checked row by row during the load (the rows are consistent by construction; a
few anti-joins check that afterwards). Run results are small JSON documents, not full logs.

The ranking history the charts draw (ranking_events: each improvement of a user's best, as
`record_run` would have written it) is loaded too.

Then `Service.ranking(name, gpu)` with its default limit (100) is timed over 300 calls after
20 warm-up calls, as `leaderboard show NAME --gpu GPU` calls it; and `GET /leaderboards/NAME?
gpu=GPU` (the same ranking as JSON, with the leaderboard) the same way, from a client in this
process to a `cluster-manager serve` process over the same database, on loopback. Last, the
leaderboard's web page (`GET /leaderboards/NAME` as a browser asks for it: both GPUs' top 100,
their records tables, the task) with its charts drawn once before (they stay cached until the
ranking changes): web_leaderboard_page_p95_ms.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import apilib
import asyncpg
import ghlib
import httpx
from benchlib import Figure, log, median, percentile, report, scratch_database

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.service import Service
from cluster_manager.storage.database import create_pool

USERS = 10_000
CODE_FILES = 50_000
SUBMISSIONS = 500_000  # two runs each: 1,000,000 runs
BOARDS = ("season-a", "season-b")
GPUS = ("H100", "B200")
SECRET_FAILS_ONE_IN = 10
CALLS = 300
WARM_UP = 20
TARGET_MS = 20.0
API_TARGET_MS = 25.0
PAGE_TARGET_MS = 50.0
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
REGISTRY = GpuRegistry({g: GpuType(g, "local") for g in GPUS})
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)
RESULT = json.dumps({"version": 1, "passed": True, "verdict": "passed", "phases": []})
FAILED_RESULT = json.dumps({"version": 1, "passed": False, "verdict": "wrong_answer"})
SYSTEM = json.dumps({"device": "H100", "cpu": "bench"})

Rankings = dict[tuple[int, str, int], tuple[float, datetime, int]]


def users() -> Iterator[tuple[Any, ...]]:
    for uid in range(1, USERS + 1):
        yield uid, str(100_000_000 + uid), f"user{uid}"


def code_files() -> Iterator[tuple[Any, ...]]:
    for cid in range(1, CODE_FILES + 1):
        code = f"def custom_kernel(data):\n    return data.clone()  # v{cid}\n"
        yield cid, hashlib.sha256(code.encode()).hexdigest(), code


class Season:
    """Submissions, jobs and runs drawn once, with the rankings they imply."""

    def __init__(self, board_ids: list[int], seed: int = 7) -> None:
        rng = random.Random(seed)
        self.rows = [
            (
                sid,
                rng.choice(board_ids),
                rng.randint(1, USERS),
                rng.randint(1, CODE_FILES),
                rng.choice(GPUS),
                EPOCH + timedelta(seconds=sid * 5),
                rng.lognormvariate(-7, 0.5),
                rng.randrange(SECRET_FAILS_ONE_IN) != 0,
            )
            for sid in range(1, SUBMISSIONS + 1)
        ]

    def submissions(self) -> Iterator[tuple[Any, ...]]:
        for sid, board, user, code, _gpu, at, _score, _ok in self.rows:
            yield sid, board, user, "submission.py", code, "leaderboard", at

    def jobs(self) -> Iterator[tuple[Any, ...]]:
        for sid, _board, _user, _code, gpu, at, _score, _ok in self.rows:
            for secret in (False, True):
                jid = sid * 2 - 1 + secret
                done = at + timedelta(seconds=3)
                yield (
                    jid,
                    sid,
                    gpu,
                    "leaderboard",
                    secret,
                    "finished",
                    "local",
                    f"job-{jid}-attempt-1",
                    1,
                    at,
                    at,
                    done,
                )

    def runs(self) -> Iterator[tuple[Any, ...]]:
        for sid, board, user, _code, gpu, at, score, ok in self.rows:
            for secret in (False, True):
                jid = sid * 2 - 1 + secret
                passed = ok or not secret
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
                    "passed" if passed else "wrong_answer",
                    score,
                    RESULT if passed else FAILED_RESULT,
                    SYSTEM,
                    at + timedelta(seconds=3),
                )

    def rankings(self) -> Iterator[tuple[Any, ...]]:
        best: Rankings = {}
        for sid, board, user, _code, gpu, at, score, ok in self.rows:
            key = (board, gpu, user)
            if ok and (key not in best or score < best[key][0]):
                best[key] = (score, at, sid)
        for (board, gpu, user), (score, at, sid) in best.items():
            yield board, gpu, user, sid, score, at

    def ranking_events(self) -> Iterator[tuple[Any, ...]]:
        """Each improvement of a user's best, oldest first (rows are in time order)."""
        best: dict[tuple[int, str, int], float] = {}
        for sid, board, user, _code, gpu, at, score, ok in self.rows:
            key = (board, gpu, user)
            if ok and (key not in best or score < best[key]):
                best[key] = score
                yield board, gpu, user, sid, score, at + timedelta(seconds=3)


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


async def copy(conn: asyncpg.Connection, table: str, columns: tuple[str, ...], rows: Any) -> float:
    began = time.perf_counter()
    await conn.copy_records_to_table(table, records=rows, columns=columns)
    return time.perf_counter() - began


async def load(url: str, board_ids: list[int]) -> dict[str, float]:
    """Bulk-loads the season; returns the seconds spent per table (and in total)."""
    began = time.perf_counter()
    season = Season(board_ids)
    seconds = {"draw": time.perf_counter() - began}
    conn = await asyncpg.connect(url)
    try:
        # Consistent by construction: skip the row-by-row foreign key triggers.
        await conn.execute("SET session_replication_role = replica")
        seconds["users"] = await copy(conn, "users", ("id", "external_id", "name"), users())
        seconds["code_files"] = await copy(
            conn, "code_files", ("id", "sha256", "code"), code_files()
        )
        seconds["submissions"] = await copy(
            conn,
            "submissions",
            (
                "id",
                "leaderboard_id",
                "user_id",
                "file_name",
                "code_id",
                "mode",
                "submitted_at",
            ),
            season.submissions(),
        )
        seconds["jobs"] = await copy(conn, "jobs", JOB_COLUMNS, season.jobs())
        seconds["runs"] = await copy(conn, "runs", RUN_COLUMNS, season.runs())
        seconds["rankings"] = await copy(
            conn,
            "rankings",
            ("leaderboard_id", "gpu", "user_id", "submission_id", "score", "submitted_at"),
            season.rankings(),
        )
        seconds["ranking_events"] = await copy(
            conn,
            "ranking_events",
            ("leaderboard_id", "gpu", "user_id", "submission_id", "score", "ranked_at"),
            season.ranking_events(),
        )
        await conn.execute("SET session_replication_role = origin")
        for table in ("users", "code_files", "submissions", "jobs", "runs", "ranking_events"):
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
}


async def check(pool: asyncpg.Pool) -> dict[str, int]:
    counts = {
        table: await pool.fetchval(f"SELECT count(*) FROM {table}")
        for table in (
            "users",
            "code_files",
            "submissions",
            "jobs",
            "runs",
            "rankings",
            "ranking_events",
        )
    }
    orphans = {name: await pool.fetchval(sql) for name, sql in ORPHAN_CHECKS.items()}
    if any(orphans.values()):
        raise RuntimeError(f"the loaded data is inconsistent: {orphans}")
    return counts


async def time_ranking(service: Service, board: str, gpu: str) -> tuple[list[float], int]:
    rows = 0
    for _ in range(WARM_UP):
        rows = len((await service.ranking(board, gpu))[gpu])
    times = []
    for _ in range(CALLS):
        began = time.perf_counter()
        await service.ranking(board, gpu)
        times.append((time.perf_counter() - began) * 1000)
    return times, rows


async def time_api(url: str, board: str, gpu: str) -> tuple[list[float], list[float]]:
    """The JSON ranking's times, then the web page's (its charts drawn beforehand)."""
    with apilib.served(url) as (base, _server):
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            api = await apilib.time_gets(client, f"/leaderboards/{board}?gpu={gpu}", CALLS, WARM_UP)
            for chart_gpu in GPUS:
                (
                    await client.get(f"/leaderboards/{board}/chart/{chart_gpu}.svg")
                ).raise_for_status()
            client.headers.update(BROWSER)
            page = await apilib.time_gets(client, f"/leaderboards/{board}", CALLS, WARM_UP)
            if "<h2>" + gpu + "</h2>" not in (await client.get(f"/leaderboards/{board}")).text:
                raise RuntimeError("the leaderboard page does not show its ranking")
            return api, page


async def run(url: str) -> list[Figure]:
    pool = await create_pool(url, max_size=4)
    try:
        service = Service(pool, REGISTRY)
        deadline = datetime.now(UTC) + timedelta(days=30)
        task = ghlib.tiny_task()
        board_ids = [
            (await service.create_leaderboard(name, task, deadline, list(GPUS))).id
            for name in BOARDS
        ]
        log(f"loading {USERS:,} users, {SUBMISSIONS:,} submissions, {2 * SUBMISSIONS:,} runs")
        seconds = await load(url, board_ids)
        log(f"loaded in {seconds['total']:.1f} s: {seconds}")
        counts = await check(pool)
        board_rows = await pool.fetchval(
            "SELECT count(*) FROM rankings WHERE leaderboard_id = $1 AND gpu = $2",
            board_ids[0],
            GPUS[0],
        )
        log(f"timing {CALLS} rankings of {BOARDS[0]} on {GPUS[0]} ({board_rows:,} ranked users)")
        times, shown = await time_ranking(service, BOARDS[0], GPUS[0])
        log(f"timing {CALLS} GET /leaderboards/{BOARDS[0]}?gpu={GPUS[0]} on a served API")
        api_times, page_times = await time_api(url, BOARDS[0], GPUS[0])
    finally:
        await pool.close()
    api = Figure(
        "api_p95_ms",
        percentile(api_times, 95),
        "ms",
        API_TARGET_MS,
        details={
            "calls": CALLS,
            "p50_ms": round(median(api_times), 3),
            "p99_ms": round(percentile(api_times, 99), 3),
            "max_ms": round(max(api_times), 3),
        },
    )
    page = Figure(
        "web_leaderboard_page_p95_ms",
        percentile(page_times, 95),
        "ms",
        PAGE_TARGET_MS,
        details={
            "calls": CALLS,
            "p50_ms": round(median(page_times), 3),
            "p99_ms": round(percentile(page_times, 99), 3),
            "max_ms": round(max(page_times), 3),
            "gpus_on_page": len(GPUS),
        },
    )
    return [
        api,
        page,
        Figure(
            "ranking_p95_ms",
            percentile(times, 95),
            "ms",
            TARGET_MS,
            details={
                "calls": CALLS,
                "p50_ms": round(median(times), 3),
                "p99_ms": round(percentile(times, 99), 3),
                "max_ms": round(max(times), 3),
                "rows_shown": shown,
                "ranked_users_on_board_gpu": board_rows,
                "rows": counts,
                "load_s": seconds,
            },
        ),
    ]


def main() -> int:
    try:
        with scratch_database("ranking") as url:
            figures = asyncio.run(run(url))
    except Exception as exc:
        figures = [
            Figure("ranking_p95_ms", None, "ms", TARGET_MS, error=repr(exc)),
            Figure("api_p95_ms", None, "ms", API_TARGET_MS, error=repr(exc)),
            Figure("web_leaderboard_page_p95_ms", None, "ms", PAGE_TARGET_MS, error=repr(exc)),
        ]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
