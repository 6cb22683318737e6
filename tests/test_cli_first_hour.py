"""A new competitor's first hour with the CLI, on a database: trying a file does not rank it,
errors name the user's own file and its size, typos hear what they likely meant, a template
is found by the task's `lang`, and counts, times and seeds read as a person writes them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.fast_task import FAST_SUBMISSION, FAST_TEMPLATE
from tests.test_cli_db import cm as cli_on_database  # noqa: F401 (a fixture)
from tests.test_cli_db import create_quick


@pytest.fixture
def cm(cli_on_database):  # noqa: F811 (the fixture imported above)
    return cli_on_database


def test_a_submit_without_mode_is_only_tested(cm):
    assert create_quick(cm).returncode == 0
    tried = cm("submit", "quick", str(FAST_SUBMISSION), "--user", "alice")
    assert tried.returncode == 0, tried.stdout + tried.stderr
    assert "(test mode) as alice" in tried.stderr
    assert "secret" not in tried.stderr and "rank #" not in tried.stdout
    assert "alice" not in cm("leaderboard", "show", "quick").stdout  # nothing ranked
    helped = " ".join(cm("submit", "--help").stdout.split())
    assert "Without --mode a file is only tested: a ranked run is made only when asked" in helped
    assert "[default: test]" in helped


def test_errors_name_the_users_own_file(cm, tmp_path: Path):
    assert create_quick(cm).returncode == 0
    crash = tmp_path / "crash.py"
    crash.write_text('def custom_kernel(data):\n    raise ValueError("boom")\n')
    done = cm("submit", "quick", str(crash), "--user", "alice", "--mode", "test")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ValueError: boom (crash.py, line 2)" in done.stdout
    assert "submission.py" not in done.stdout


def test_the_size_error_gives_the_files_size_and_the_limit(cm, tmp_path: Path):
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * (300 << 10))
    done = cm("submit", "quick", str(big), "--user", "alice")
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {big} is 300 KiB, over the limit of 256 KiB"


def test_a_mistyped_leaderboard_hears_what_it_likely_meant(cm):
    assert create_quick(cm).returncode == 0
    typo = cm("submit", "quik", str(FAST_SUBMISSION), "--user", "alice")
    assert typo.returncode == 2
    assert typo.stderr.strip() == "error: there is no leaderboard named 'quik'; did you mean quick?"
    far = cm("leaderboard", "show", "zzz")
    assert far.stderr.strip() == "error: there is no leaderboard named 'zzz'"


def test_a_template_is_found_by_the_tasks_lang(cm):
    assert create_quick(cm).returncode == 0
    by_lang = cm("leaderboard", "template", "quick", "py")
    assert by_lang.returncode == 0, by_lang.stderr
    assert by_lang.stdout == FAST_TEMPLATE.read_text()
    assert cm("leaderboard", "template", "quick", "Python").stdout == by_lang.stdout
    none = cm("leaderboard", "template", "quick", "cu")
    assert none.returncode == 2
    assert "'quick' has no 'cu' template (it has: Python)" in none.stderr


def test_counts_times_and_seeds_read_as_written(cm):
    assert create_quick(cm).returncode == 0
    listed = cm("leaderboard", "list").stdout
    assert "over a year" in listed and not re.search(r"\d{3,}d \d+h", listed)  # 2099

    tried = cm("submit", "quick", str(FAST_SUBMISSION), "--user", "alice", "--no-wait")
    assert tried.returncode == 0, tried.stderr
    stats = cm("admin", "stats", "--last-day")
    assert stats.returncode == 0, stats.stderr
    assert "1 submission from 1 user (2 users known)"  # and the board's creator in stats.stdout
    assert re.search(r"^Stats \(since \d{4}-\d\d-\d\d \d\d:\d\d UTC\)$", stats.stdout, re.M)

    seed = cm("eval", str(FAST_SUBMISSION.parent), str(FAST_SUBMISSION), "--seed", "abc")
    assert seed.returncode == 2
    assert "'abc' is not a seed: give a whole number from 0 to 2147483647" in seed.stderr
