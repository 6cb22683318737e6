"""`cluster-manager admin ...` on a real database, and through a server where only the admin
token may use it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster_manager.app import App
from tests.api.conftest import ADMIN_TOKEN, token_of
from tests.api.test_remote_cli import run_cli
from tests.test_cli_db import FUTURE, IDENTITY
from tests.test_cli_db import cm as cli_on_database

cm = cli_on_database  # the fixture, under the name the tests use

pytestmark = pytest.mark.timeout(300)


# Real runs: the CLI on the database is a process of its own, with its own launchers.
def submit(cm, user: str):
    return cm(
        "submit", "identity", str(IDENTITY / "submission.py"), "--user", user, "--mode", "test"
    )


@pytest.mark.reliability(
    "Access",
    "a banned user, and anyone while submissions are paused, submitting with the CLI on the "
    "database",
    "exit 2 with the ban's or the pause's reason; nothing stored",
)
def test_pause_ban_and_stats_on_the_database(cm):
    created = cm(
        "leaderboard",
        "create",
        "identity",
        "--task",
        str(IDENTITY),
        "--deadline",
        FUTURE,
        "--gpu",
        "CPU",
    )
    assert created.returncode == 0, created.stderr
    paused = cm("admin", "pause", "--reason", "GPU outage")
    assert paused.returncode == 0 and "paused everywhere: GPU outage" in paused.stdout
    refused = submit(cm, "alice")
    assert (
        refused.returncode == 2
        and "submissions are paused everywhere: GPU outage" in refused.stderr
    )
    assert "paused everywhere: GPU outage (cli:" in cm("admin", "status").stdout
    assert "resumed everywhere" in cm("admin", "resume").stdout
    assert "was not paused" in cm("admin", "resume").stdout

    assert "banned alice: spam" in cm("admin", "ban", "alice", "--reason", "spam").stdout
    banned = submit(cm, "alice")
    assert banned.returncode == 2 and "you may not submit here: spam" in banned.stderr
    assert submit(cm, "bob").returncode == 0
    assert (
        "quotas of carol: per hour default, daily 2"
        in cm("admin", "quota", "carol", "--daily", "2").stdout
    )
    assert "carol has the deployment's quotas" in cm("admin", "quota", "carol", "--clear").stdout
    queue = cm("queue", "--user", "bob")
    assert queue.returncode == 0 and "queued" in queue.stdout and "CPU" in queue.stdout
    invalidated = cm("admin", "invalidate", "1", "--reason", "copied kernel")
    assert invalidated.returncode == 0 and "invalidated submission 1" in invalidated.stdout
    assert "restored submission 1" in cm("admin", "restore", "1").stdout
    nothing = cm("admin", "rerun", "identity")
    assert nothing.returncode == 2 and "nothing ranked on 'identity'" in nothing.stderr
    unknown = cm("admin", "invalidate", "99", "--reason", "x")
    assert unknown.returncode == 2 and "there is no submission 99" in unknown.stderr
    assert "unbanned alice" in cm("admin", "unban", "alice").stdout

    stats = json.loads(cm("admin", "stats", "--json").stdout)
    assert stats["submissions"] == 1 and stats["gpus"]["CPU"]["runs"] == 1
    table = cm("admin", "stats").stdout
    assert "submissions 1 from 1 users" in table and "wait p95" in table
    no_reason = cm("admin", "pause")
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr


async def test_over_the_api_only_the_admin_token_may(app: App, live_url: str, tmp_path: Path):
    user_token = await token_of(app, "alice")
    as_user = await run_cli(
        "admin", "pause", "--reason", "x", url=live_url, token=user_token, cwd=tmp_path
    )
    assert as_user.returncode == 2 and "admin token only" in as_user.stderr
    assert await app.service.pauses() == []
    env = {"CLUSTER_MANAGER_ADMIN_TOKEN": ADMIN_TOKEN}
    as_admin = await run_cli(
        "admin",
        "pause",
        "-l",
        "identity",
        "--reason",
        "fixing",
        url=live_url,
        token=None,
        cwd=tmp_path,
        env=env,
    )
    assert as_admin.returncode == 0, as_admin.stderr
    assert [p.leaderboard for p in await app.service.pauses()] == ["identity"]
    status = await run_cli("admin", "status", url=live_url, token=None, cwd=tmp_path, env=env)
    assert "paused identity: fixing (admin (API))" in status.stdout


def test_invite_only_with_the_cli(cm):
    created = cm(
        "leaderboard",
        "create",
        "identity",
        "--task",
        str(IDENTITY),
        "--deadline",
        FUTURE,
        "--gpu",
        "CPU",
    )
    assert created.returncode == 0, created.stderr
    assert "is invite-only" in cm("admin", "close", "identity").stdout
    refused = submit(cm, "alice")
    assert refused.returncode == 2 and "'identity' is invite-only" in refused.stderr
    minted = cm("admin", "invites", "identity", "--mint", "2")
    first, second = minted.stdout.split()
    assert cm("join", first, "--user", "alice").stdout.strip() == "joined identity"
    again = cm("join", first, "--user", "bob")
    assert again.returncode == 2 and "used as often as it may be" in again.stderr
    assert submit(cm, "alice").returncode == 0
    assert f"revoked {second}" in cm("admin", "revoke-invite", second).stdout
    listing = cm("admin", "invites", "identity").stdout
    assert f"{first}  1/1 used" in listing and f"{second}  revoked" in listing
    assert "open to everyone" in cm("admin", "open", "identity").stdout
    assert submit(cm, "bob").returncode == 0
