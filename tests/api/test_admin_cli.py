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

    # alice's refused submission stored nothing, her name neither: only --force bans it.
    banned = cm("admin", "ban", "alice", "--reason", "spam", "--force")
    assert "banned alice: spam" in banned.stdout
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
    assert "1 submission from 1 user (" in table and "wait p95" in table
    no_reason = cm("admin", "pause")
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr


async def test_over_the_api_only_the_admin_token_may(app: App, live_url: str, tmp_path: Path):
    user_token = await token_of(app, "alice")
    as_user = await run_cli(
        "admin", "pause", "--reason", "x", url=live_url, token=user_token, cwd=tmp_path
    )
    assert as_user.returncode == 2 and "admin token only" in as_user.stderr
    assert await app.service.controls.pauses() == []
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
    assert [p.leaderboard for p in await app.service.controls.pauses()] == ["identity"]
    status = await run_cli("admin", "status", url=live_url, token=None, cwd=tmp_path, env=env)
    assert "paused identity: fixing (admin (API))" in status.stdout


def test_a_ban_of_a_name_nobody_used_is_refused_unless_forced(cm):
    typo = cm("admin", "ban", "nosuchuser", "--reason", "spam")
    assert typo.returncode == 2, typo.stdout + typo.stderr
    (line,) = typo.stderr.strip().splitlines()
    assert "nobody named 'nosuchuser' has submitted here or is a known user" in line
    assert "`--force` bans the name anyway" in line
    assert "nobody is banned" in cm("admin", "status").stdout
    forced = cm("admin", "ban", "nosuchuser", "--reason", "spam", "--force")
    assert forced.returncode == 0 and "banned nosuchuser: spam" in forced.stdout
    assert cm("user", "token", "bob").returncode == 0  # bob is known here from now on
    known = cm("admin", "ban", "bob", "--reason", "spam")
    assert known.returncode == 0 and "banned bob: spam" in known.stdout


def test_quota_without_options_shows_the_limits_and_status_lists_custom_ones(cm):
    deployment = {"CLUSTER_MANAGER_RATE_LIMIT_PER_HOUR": "30", "CLUSTER_MANAGER_DAILY_QUOTA": "500"}
    unknown = cm("admin", "quota", "carol", env=deployment)
    assert unknown.returncode == 2 and "there is no user 'carol'" in unknown.stderr
    assert "daily 2" in cm("admin", "quota", "carol", "--daily", "2").stdout
    shown = cm("admin", "quota", "carol", env=deployment)
    assert shown.returncode == 0, shown.stderr
    assert "quotas of carol (carol):" in shown.stdout
    assert "per hour per leaderboard: 30 test/benchmark, 30 ranked (deployment's)" in shown.stdout
    assert "daily, all leaderboards: 2 (custom)" in shown.stdout
    assert "set by cli:" in shown.stdout
    status = cm("admin", "status").stdout
    assert "carol (carol) quotas: per hour default, daily 2 (cli:" in status, status
    assert "carol has the deployment's quotas" in cm("admin", "quota", "carol", "--clear").stdout
    cleared = cm("admin", "quota", "carol", env=deployment).stdout
    assert "daily, all leaderboards: 500 (deployment's)" in cleared
    assert "no quotas of their own" in cleared
    assert "quotas:" not in cm("admin", "status").stdout


async def test_ban_quota_and_status_through_the_server(app: App, live_url: str, tmp_path: Path):
    env = {"CLUSTER_MANAGER_ADMIN_TOKEN": ADMIN_TOKEN}

    async def admin(*args: str):
        return await run_cli("admin", *args, url=live_url, token=None, cwd=tmp_path, env=env)

    typo = await admin("ban", "nosuchuser", "--reason", "spam")
    assert typo.returncode == 2 and "`--force` bans the name anyway" in typo.stderr
    assert await app.service.controls.bans() == []
    assert (await admin("ban", "nosuchuser", "--reason", "spam", "--force")).returncode == 0
    assert (await admin("quota", "carol", "--per-hour", "7")).returncode == 0
    shown = await admin("quota", "carol")
    assert "per hour per leaderboard: 7 test/benchmark, 7 ranked (custom)" in shown.stdout
    status = (await admin("status")).stdout
    assert "nosuchuser (nosuchuser) banned: spam" in status
    assert "carol (carol) quotas: per hour 7, daily default (admin (API))" in status


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
    # To a non-member it is missing, as it is everywhere: nothing says that it exists.
    assert refused.returncode == 2
    assert refused.stderr.strip() == "error: there is no leaderboard named 'identity'"
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
