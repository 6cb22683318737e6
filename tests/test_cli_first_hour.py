"""A new competitor's first hour with the CLI, on a database: trying a file does not rank it,
errors name the user's own file and its size, typos hear what they likely meant, a template
is found by the task's `lang`, and counts, times and seeds read as a person writes them."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.fast_task import FAST_SUBMISSION, FAST_TASK, FAST_TEMPLATE
from tests.test_cli_db import cm as cli_on_database  # noqa: F401 (a fixture)
from tests.test_cli_db import create_quick


@pytest.fixture
def cm(cli_on_database):  # noqa: F811 (the fixture imported above)
    return cli_on_database


@pytest.fixture
def on_a_terminal(db_url: str, tmp_path: Path):
    """`cluster-manager` with stdin, stdout and stderr on a terminal (a pseudo-terminal), as a
    person runs it: what it printed, and its exit code, once `answer` is typed at a prompt
    that ends with `prompt`."""

    def run(*args: str, prompt: str, answer: str) -> tuple[str, int]:
        env = {k: v for k, v in os.environ.items() if k != "CLUSTER_MANAGER_API_URL"}
        env |= {"DATABASE_URL": db_url, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")}
        ours, theirs = pty.openpty()
        command = [sys.executable, "-m", "cluster_manager", *args]
        process = subprocess.Popen(
            command, stdin=theirs, stdout=theirs, stderr=theirs, env=env, cwd=tmp_path
        )
        os.close(theirs)
        seen, answered, deadline = b"", False, time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if not answered and prompt.encode() in seen:
                    os.write(ours, answer.encode() + b"\n")
                    answered = True
                if not select.select([ours], [], [], 1)[0]:
                    continue
                try:
                    chunk = os.read(ours, 4096)
                except OSError:  # the terminal is gone with the process
                    break
                if not chunk:
                    break
                seen += chunk
            return seen.decode(errors="replace"), process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            os.close(ours)

    return run


def test_a_submit_without_mode_is_only_tested(cm):
    assert create_quick(cm).returncode == 0
    tried = cm("submit", "quick", str(FAST_SUBMISSION), "--user", "alice")
    assert tried.returncode == 0, tried.stdout + tried.stderr
    assert "(test mode) as alice" in tried.stderr
    assert "secret" not in tried.stderr and "rank #" not in tried.stdout
    assert "alice" not in cm("leaderboard", "show", "quick").stdout  # nothing ranked
    helped = " ".join(cm("submit", "--help").stdout.split())
    assert (
        "Without --mode, at a terminal you are asked which; in a script or CI a file is only"
        in helped
    )
    assert "only tested: a ranked run is made only when asked for" in helped
    assert "[default: test]" in helped


def test_at_a_terminal_submit_asks_which_mode(cm, on_a_terminal):
    """As popcorn-cli does: a person at a terminal who gave no --mode is asked, Enter being a
    test run; a script (no terminal) is never asked and gets a test run."""
    assert create_quick(cm).returncode == 0
    submit = ("submit", "quick", str(FAST_SUBMISSION), "--user", "alice", "--no-wait")
    ranked, code = on_a_terminal(*submit, prompt="[test]: ", answer="leaderboard")
    assert code == 0, ranked
    assert "Which run? test: correctness only;" in ranked
    assert "leaderboard: ranked (a secret re-run, counted against the ranked quota)" in ranked
    assert "(leaderboard mode) as alice" in ranked
    tried, code = on_a_terminal(*submit, prompt="[test]: ", answer="")
    assert code == 0 and "(test mode) as alice" in tried, tried
    asked, code = on_a_terminal(*submit, "--mode", "benchmark", prompt="never", answer="")
    assert code == 0 and "Which run?" not in asked and "(benchmark mode)" in asked, asked
    scripted = cm(*submit)
    assert "Which run?" not in scripted.stderr and "(test mode) as alice" in scripted.stderr


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
    assert done.stderr.strip() == (
        f"error: {big} is 300 KiB, over the 256 KiB limit for a submission"
    )


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
    for name in ("Python", "PY", "python3"):  # its name, the task's lang and an alias, any case
        assert cm("leaderboard", "template", "quick", name).stdout == by_lang.stdout, name
    none = cm("leaderboard", "template", "quick", "cu")
    assert none.returncode == 2
    # The refusal says the names it takes.
    assert none.stderr.strip() == (
        "error: 'quick' has no 'cu' template (it has: Python, asked for as python, py or python3)"
    )


def test_counts_times_and_seeds_read_as_written(cm):
    assert create_quick(cm).returncode == 0
    listed = cm("leaderboard", "list").stdout
    assert "over a year" in listed and not re.search(r"\d{3,}d \d+h", listed)  # 2099

    tried = cm("submit", "quick", str(FAST_SUBMISSION), "--user", "alice", "--no-wait")
    assert tried.returncode == 0, tried.stderr
    stats = cm("admin", "stats", "--last-day")
    assert stats.returncode == 0, stats.stderr
    assert "1 submission from 1 user (2 users known)" in stats.stdout  # and the board's creator
    assert re.search(r"^Stats \(since \d{4}-\d\d-\d\d \d\d:\d\d UTC\)$", stats.stdout, re.M)

    seed = cm("eval", str(FAST_SUBMISSION.parent), str(FAST_SUBMISSION), "--seed", "abc")
    assert seed.returncode == 2
    assert "'abc' is not a seed: give a whole number from 0 to 2147483647" in seed.stderr


def test_times_and_counts_as_a_person_reads_them(cm):
    """A deadline days away in days and hours; a moment to the minute, in UTC; a phase's
    cases counted in words; every dispatch in the same words."""
    soon = (datetime.now(UTC) + timedelta(days=3, hours=4, minutes=30)).isoformat()
    created = cm(
        "leaderboard", "create", "soon", "--task", str(FAST_TASK), "--deadline", soon,
        "--gpu", "CPU",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert re.fullmatch(
        r"created soon on CPU until \d{4}-\d\d-\d\d \d\d:\d\d UTC\n", created.stdout
    )
    listed = cm("leaderboard", "list").stdout
    assert re.search(r"soon .* 3 days 4 hours ", listed), listed
    past = cm(
        "leaderboard", "create", "past", "--task", str(FAST_TASK),
        "--deadline", "2020-01-01T01:02:03.456789+02:00", "--gpu", "CPU",
    )  # fmt: skip
    assert past.stderr.strip() == "error: the deadline 2019-12-31 23:02 UTC has already passed"

    tried = cm("submit", "soon", str(FAST_SUBMISSION), "--user", "alice")
    assert tried.returncode == 0, tried.stderr
    assert "[CPU] dispatched to the local launcher" in tried.stderr
    assert "[CPU] running test: 1 case\n" in tried.stderr  # the fast task has one test

    assert cm("admin", "invites", "soon", "--mint", "1").returncode == 0
    invites = cm("admin", "invites", "soon").stdout
    assert re.search(r"\(\S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC\)$", invites, re.M), invites
