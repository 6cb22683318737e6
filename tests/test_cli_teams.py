"""Teams through the CLI on a database: `team create/invite/join/show/list/leave` as the
`--user` given, `leaderboard show` printing a team's entry as "TEAM (user)", and
`admin teams` setting the rules and printing them."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.service import Service
from tests.storage.helpers import ALICE, BOB, CAROL, finish_submission, make_board, submit
from tests.test_cli_after_deadline import cm

BOARD = "board"


@pytest.fixture
async def service(pool: asyncpg.Pool, registry: GpuRegistry) -> Service:
    found = Service(pool, registry)
    await make_board(found)
    return found


def ok(db_url: str, cwd: Path, *args: str) -> str:
    done = cm(db_url, cwd, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_a_team_from_creation_to_leaving(service: Service, db_url: str, tmp_path: Path):
    made = ok(db_url, tmp_path, "team", "create", BOARD, "red", "--user", "alice")
    assert made.strip() == "created team red on board"
    code = ok(db_url, tmp_path, "team", "invite", BOARD, "--user", "alice").strip()
    assert code.startswith("team_")
    joined = ok(db_url, tmp_path, "team", "join", code, "--user", "bob")
    assert joined.strip() == "joined team red on board"

    shown = ok(db_url, tmp_path, "team", "show", BOARD, "--user", "bob")
    assert shown.splitlines() == ["red on board (2/4 members)", "  alice", "  bob"]
    ok(db_url, tmp_path, "team", "create", BOARD, "blue", "--user", "carol")
    listed = ok(db_url, tmp_path, "team", "list", BOARD)
    assert listed.splitlines() == [
        "blue on board (1/4 members)",
        "  carol",
        "red on board (2/4 members)",
        "  alice",
        "  bob",
    ]

    left = ok(db_url, tmp_path, "team", "leave", BOARD, "--user", "alice")
    assert left.strip() == "left team red on board"
    alone = ok(db_url, tmp_path, "team", "show", BOARD, "--user", "alice")
    assert alone.strip() == "you are in no team on board"
    assert [t.members for t in await service.teams.all(BOARD)] == [("carol",), ("bob",)]


async def test_refusals_are_one_line(service: Service, db_url: str, tmp_path: Path):
    await service.teams.create(BOARD, "red", ALICE)
    second = cm(db_url, tmp_path, "team", "create", BOARD, "blue", "--user", "alice")
    assert second.returncode == 2
    assert second.stderr.strip() == "error: you are in team 'red' on 'board': leave it first"
    bad = cm(db_url, tmp_path, "team", "create", BOARD, " x", "--user", "bob")
    assert bad.returncode == 2 and "may only hold" in bad.stderr
    used = cm(db_url, tmp_path, "team", "join", "team_nosuch", "--user", "bob")
    assert used.returncode == 2 and "unknown or was used already" in used.stderr
    assert [t.name for t in await service.teams.all(BOARD)] == ["red"]


async def test_a_teams_entry_shows_its_name_and_best_member(
    service: Service, pool: asyncpg.Pool, db_url: str, tmp_path: Path
):
    await service.teams.create(BOARD, "red", ALICE)
    await service.teams.join(await service.teams.invite(BOARD, ALICE), BOB)
    for user, score in ((ALICE, 5.0), (BOB, 3.0), (CAROL, 4.0)):
        await finish_submission(pool, await submit(service, user=user), score)

    rows = ok(db_url, tmp_path, "leaderboard", "show", BOARD).splitlines()
    ranked = [line.split()[:3] for line in rows if line.strip().startswith("#")]
    assert ranked == [["#1", "red", "(bob)"], ["#2", "carol", "4"]]


async def test_admin_teams_sets_the_rules_and_prints_them(
    service: Service, db_url: str, tmp_path: Path
):
    now = ok(db_url, tmp_path, "admin", "teams", BOARD)
    assert now.strip() == "board: teams of up to 4; the hourly quota is each member's own"
    set_ = ok(db_url, tmp_path, "admin", "teams", BOARD, "--size", "2", "--shared-quota")
    assert set_.strip() == "board: teams of up to 2; the hourly quota is shared by each team"
    board = await service.leaderboards.get(BOARD)
    assert (board.team_size, board.team_quotas) == (2, True)
    too_big = cm(db_url, tmp_path, "admin", "teams", BOARD, "--size", "101")
    assert too_big.returncode == 2 and "a team has 1 to 100 members, not 101" in too_big.stderr
