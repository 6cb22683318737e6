"""A leaderboard as a data set: rankings as the pages show them, every submission with code
and runs; CSV, JSON lines and Parquet agree; a page boundary loses nothing."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.parquet as pq
import pytest

from cluster_manager.rendering.exports import write_export
from cluster_manager.service import exports
from tests.storage.helpers import ALICE, BOB, CAROL, finish_submission, make_board, submit


@pytest.fixture
async def season(service, pool):
    await make_board(service, "board", gpus=["CPU", "H100"])
    ids = {}
    for user, score in ((ALICE, 2.0), (ALICE, 1.0), (BOB, 3.0), (CAROL, 0.5)):
        receipt = await submit(service, user=user, gpus=["CPU"])
        await finish_submission(pool, receipt, score)
        ids[(user.external_id, score)] = receipt.submission_id
    await service.controls.ban(CAROL, "spam", "org")  # hidden from the rankings, kept in --all
    return ids


async def export(service, kind, fmt) -> bytes:
    sink = io.BytesIO()
    pages = (
        service.exports.rankings("board")
        if kind == "rankings"
        else service.exports.submissions("board")
    )
    await write_export(pages, kind, fmt, sink)
    return sink.getvalue()


async def test_rankings_are_what_the_pages_show(service, season):
    rows = list(csv.DictReader(io.StringIO((await export(service, "rankings", "csv")).decode())))
    assert [(r["gpu"], r["rank"], r["user_id"], float(r["score_s"])) for r in rows] == [
        ("CPU", "1", "alice", 1.0),
        ("CPU", "2", "bob", 3.0),
    ]
    assert int(rows[0]["submission_id"]) == season[("alice", 1.0)]
    table = pq.read_table(io.BytesIO(await export(service, "rankings", "parquet"))).to_pylist()
    assert [(r["user_id"], r["rank"], r["score_s"]) for r in table] == [
        ("alice", 1, 1.0),
        ("bob", 2, 3.0),
    ]


async def test_all_holds_every_submission_with_code_and_runs(service, season, monkeypatch):
    monkeypatch.setattr(exports, "PAGE", 3)  # two pages: the boundary must lose nothing
    lines = (await export(service, "submissions", "jsonl")).decode().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["submission_id"] for r in rows] == sorted(season.values())
    first = rows[0]
    assert first["user_id"] == "alice" and "def custom_kernel" in first["code"]
    assert sorted((r["secret"], r["passed"]) for r in first["runs"]) == [
        (False, True),
        (True, True),
    ]
    assert {r["score"] for r in first["runs"] if not r["secret"]} == {2.0}
    parquet = pq.read_table(io.BytesIO(await export(service, "submissions", "parquet")))
    assert parquet.num_rows == 4 and parquet.column("code").to_pylist() == [r["code"] for r in rows]
    flat = list(csv.DictReader(io.StringIO((await export(service, "submissions", "csv")).decode())))
    assert json.loads(flat[0]["runs"]) == first["runs"]  # CSV keeps the runs as JSON


async def test_an_unknown_leaderboard_is_refused(service):
    from cluster_manager.service import NotFoundError

    with pytest.raises(NotFoundError):
        await export(service, "rankings", "csv")
