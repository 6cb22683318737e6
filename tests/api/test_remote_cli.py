"""Our CLI pointed at a server (CLUSTER_MANAGER_API_URL + CLUSTER_MANAGER_TOKEN): the same
output, live progress and exit codes as on a database, through the HTTP API."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_manager.app import App
from tests.api.conftest import BOARD, IDENTITY, token_of


async def run_cli(
    *args: str, url: str, token: str | None, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    extra = env or {}
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CLUSTER_MANAGER_TOKEN"}
    }
    env["CLUSTER_MANAGER_API_URL"] = url
    env["CLUSTER_MANAGER_DATA_DIR"] = str(cwd / "no-database-here")
    if token is not None:
        env["CLUSTER_MANAGER_TOKEN"] = token
    env.update(extra)
    # In a thread: the server answering it runs on this test's event loop.
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "cluster_manager", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


@pytest.mark.usefixtures("scheduler")
async def test_submit_through_the_api_follows_live_and_ranks(
    app: App, live_url: str, tmp_path: Path
):
    token = await token_of(app, "alice")
    done = await run_cli(
        "submit",
        BOARD,
        str(IDENTITY / "submission.py"),
        "--gpu",
        "CPU",
        "--mode",
        "leaderboard",
        url=live_url,
        token=token,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[CPU] queued" in done.stderr or "[CPU] dispatched to the local launcher" in done.stderr
    assert "a launcher" not in done.stderr  # each dispatch names its launcher
    assert "[CPU secret] ✅ passed" in done.stderr
    assert "🏆 rank #1" in done.stdout and "[CPU]" in done.stdout
    assert "(the slower of your public and secret runs)" in done.stdout
    assert not (tmp_path / "no-database-here").exists()  # no embedded database was started
    listed = await run_cli("leaderboard", "list", url=live_url, token=token, cwd=tmp_path)
    assert listed.returncode == 0 and BOARD in listed.stdout and "CPU, CPU2" in listed.stdout
    shown = await run_cli("leaderboard", "show", BOARD, url=live_url, token=token, cwd=tmp_path)
    assert shown.returncode == 0 and "#1    alice" in shown.stdout


@pytest.mark.usefixtures("scheduler")
async def test_a_failing_submission_exits_1(app: App, live_url: str, tmp_path: Path):
    token = await token_of(app, "alice")
    done = await run_cli(
        "submit",
        BOARD,
        str(IDENTITY / "wrong" / "wrong_answer.py"),
        "--gpu",
        "CPU",
        "--mode",
        "test",
        url=live_url,
        token=token,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "❌" in done.stdout


async def test_refusals_are_one_line_errors_with_exit_2(app: App, live_url: str, tmp_path: Path):
    token = await token_of(app, "alice")
    solution = str(IDENTITY / "submission.py")
    cases = [
        (("submit", "nope", solution), token, "there is no leaderboard named 'nope'"),
        (("submit", BOARD, solution), token, "runs on several GPUs; choose from CPU, CPU2"),
        (("submit", BOARD, solution, "--gpu", "CPU"), None, "CLUSTER_MANAGER_TOKEN is not"),
        (("submit", BOARD, solution, "--gpu", "CPU"), "cm_wrong", "unknown or revoked API token"),
        (("submit", BOARD, solution, "--user", "bob"), token, "--user is for the database"),
        (("leaderboard", "show", "nope"), token, "no leaderboard named 'nope'"),
        # A typo hears what it likely meant, through the server as on a database.
        (("submit", "identiy", solution), token, "named 'identiy'; did you mean identity?"),
        (
            ("submit", BOARD, solution, "--gpu", "cpux"),
            token,
            f"{BOARD!r} does not run on 'cpux'; did you mean CPU or CPU2? (it runs on CPU, CPU2)",
        ),
    ]
    for args, used_token, message in cases:
        done = await run_cli(*args, url=live_url, token=used_token, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and done.stderr.startswith("error: "), (args, done.stderr)
        assert "(HTTP" not in done.stderr  # the server's sentence, not a status code
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0


async def test_task_files_and_template_through_the_api(app: App, live_url: str, tmp_path: Path):
    out = tmp_path / "task"
    done = await run_cli(
        "leaderboard", "task", BOARD, "--out", str(out), url=live_url, token=None, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (out / "reference.py").read_text() == (IDENTITY / "reference.py").read_text()
    listed = await run_cli("leaderboard", "task", BOARD, url=live_url, token=None, cwd=tmp_path)
    assert "reference.py" in listed.stdout and "Identity" in listed.stdout
    template = await run_cli(
        "leaderboard", "template", BOARD, "python", url=live_url, token=None, cwd=tmp_path
    )
    assert template.stdout == (IDENTITY / "template.py").read_text()
    by_lang = await run_cli(  # the task's `lang` names its template too
        "leaderboard", "template", BOARD, "py", url=live_url, token=None, cwd=tmp_path
    )
    assert by_lang.returncode == 0 and by_lang.stdout == template.stdout, by_lang.stderr


async def test_an_unreachable_server_is_exit_2(tmp_path: Path):
    done = await run_cli("leaderboard", "list", url="http://127.0.0.1:9", token="x", cwd=tmp_path)
    assert done.returncode == 2 and "cannot reach the API at http://127.0.0.1:9" in done.stderr
