"""A command run without DATABASE_URL and without CLUSTER_MANAGER_API_URL makes an embedded
database in the working folder: when it made it just now, it says so (a read that expected a
server's leaderboard would otherwise only say that there is none)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cli import environment, run_cli

pytestmark = pytest.mark.timeout(300)

NOTE = (
    "this command created a new{} local database in .data/postgres (DATABASE_URL is unset): "
    "set CLUSTER_MANAGER_API_URL to use a server, or DATABASE_URL for another database"
)


def cm(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    unset = {"DATABASE_URL", "CLUSTER_MANAGER_API_URL", "CLUSTER_MANAGER_DATA_DIR"}
    return run_cli(*args, env=environment(unset=unset), cwd=cwd, timeout=240)


@pytest.mark.reliability(
    "Bad input",
    "a read (`leaderboard task identity`) with neither DATABASE_URL nor a server set",
    "the error says it made a new, empty local database and how to point at a server",
)
def test_a_read_on_a_database_it_just_made_says_so(traversable_tmp: Path, record_property):
    missing = cm(traversable_tmp, "leaderboard", "task", "identity")
    assert missing.returncode == 2, missing.stderr
    (line,) = missing.stderr.strip().splitlines()
    record_property("observed", line)
    assert line == f"error: there is no leaderboard named 'identity'; {NOTE.format(', empty')}"
    assert (traversable_tmp / ".data" / "postgres" / "PG_VERSION").is_file()

    again = cm(traversable_tmp, "leaderboard", "task", "identity")  # the database was there already
    assert again.returncode == 2
    assert again.stderr.strip() == "error: there is no leaderboard named 'identity'"


def test_a_command_that_made_the_database_notes_it_after_its_answer(traversable_tmp: Path):
    listed = cm(traversable_tmp, "leaderboard", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.strip() == f"note: {NOTE.format('')}"
    assert cm(traversable_tmp, "leaderboard", "list").stderr == ""
