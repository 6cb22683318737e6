"""/admin: pause and resume, ban and unban, status and stats, for Leaderboard Admins only; a
banned user's or a paused leaderboard's /leaderboard submit gets the reason, privately."""

from __future__ import annotations

import re

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.rendering.ops import format_user_quotas
from cluster_manager.service import Submitter
from tests.discord.conftest import ADMIN, ALICE, BOB, CREATOR, create_board
from tests.discord.test_errors import SOLUTION, assert_private_error, stored

ADMIN_COMMANDS = [
    ("admin pause", {"reason": "outage"}),
    ("admin resume", {}),
    ("admin ban", {"user": BOB, "reason": "spam"}),
    ("admin unban", {"user": BOB}),
    ("admin status", {}),
    ("admin stats", {}),
    ("admin invalidate", {"submission_id": 1, "reason": "cheat"}),
    ("admin restore", {"submission_id": 1}),
    ("admin close", {"leaderboard": "identity"}),
    ("admin open", {"leaderboard": "identity"}),
    ("admin invites", {"leaderboard": "identity", "mint": 2}),
    ("admin revoke-invite", {"code": "inv_x"}),
    ("admin quota", {"user": BOB, "daily": 5}),
    ("admin quota", {"user": BOB}),
    ("admin rerun", {"leaderboard": "identity"}),
    ("admin channel-policy", {"leaderboard": "identity", "policy": "all"}),
    ("admin after-deadline", {"leaderboard": "identity", "allowed": False}),
    ("admin teams", {"leaderboard": "identity", "size": 2, "shared_quota": True}),
]


@pytest.mark.reliability(
    "Access",
    "every /admin command by a member without the Admin role (a Leaderboard Creator, a member)",
    "refused ('Missing role'); nothing paused or banned",
)
@pytest.mark.parametrize(("path", "options"), ADMIN_COMMANDS)
async def test_admin_commands_are_for_admins_only(harness, app, path, options):
    for member in (ALICE, CREATOR):
        reply = await harness.command(path, member, **options)
        assert reply.only.ephemeral and "Missing role" in reply.only.content, (path, member)
    assert await app.service.controls.pauses() == [] and await app.service.controls.bans() == []


async def test_pause_refuses_submissions_with_the_reason_until_resumed(harness, app, clock):
    await create_board(app, clock)
    paused = await harness.command(
        "admin pause", ADMIN, reason="GPU outage", leaderboard="identity"
    )
    assert paused.only.ephemeral and "Paused identity: GPU outage" in paused.only.content
    script = harness.upload("submission.py", SOLUTION)
    refused = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    assert_private_error(refused, "Submissions paused", "paused on 'identity': GPU outage")
    assert await stored(app, "submissions") == 0
    status = await harness.command("admin status", ADMIN)
    assert "paused identity: GPU outage (discord:root)" in status.only.content
    resumed = await harness.command("admin resume", ADMIN, leaderboard="identity")
    assert "Resumed identity" in resumed.only.content


@pytest.mark.reliability(
    "Access",
    "a banned user's /leaderboard submit in Discord",
    "private 'Banned' error with the reason; nothing stored; unbanning lets them submit",
)
async def test_a_banned_member_is_refused_privately(harness, app, clock):
    await create_board(app, clock)
    banned = await harness.command("admin ban", ADMIN, user=ALICE, reason="generated spam")
    assert "Banned <@1001>: generated spam" in banned.only.content
    script = harness.upload("submission.py", SOLUTION)
    refused = await harness.command(
        "leaderboard submit", ALICE, script=script, leaderboard="identity"
    )
    assert_private_error(refused, "Banned", "you may not submit here: generated spam")
    assert await stored(app, "submissions") == 0
    assert [b.user for b in await app.service.controls.bans()] == [str(ALICE.id)]
    lifted = await harness.command("admin unban", ADMIN, user=ALICE)
    assert "Unbanned <@1001>." in lifted.only.content
    assert await app.service.controls.bans() == []


async def test_stats_are_a_private_table(harness, app, clock):
    await create_board(app, clock)
    reply = await harness.command("admin stats", ADMIN, last_day=True)
    assert reply.only.ephemeral and "Stats (since" in reply.only.content
    assert "0 submissions from 0 users" in reply.only.content
    assert re.search(r"Stats \(since \d{4}-\d\d-\d\d \d\d:\d\d UTC\)", reply.only.content)


async def test_invalidate_and_restore_answer_privately(harness, app, clock):
    await create_board(app, clock)
    receipt = await app.service.submissions.submit(
        "identity", Submitter("1001", "alice"), "submission.py", SOLUTION, mode=Mode.TEST
    )
    submission_id = receipt.submission_id
    out = await harness.command(
        "admin invalidate", ADMIN, submission_id=submission_id, reason="copied kernel"
    )
    assert out.only.ephemeral and "out of the rankings: copied kernel" in out.only.content
    assert (await app.service.submissions.report(submission_id)).submission.invalidated is not None
    back = await harness.command("admin restore", ADMIN, submission_id=submission_id)
    assert "ranks again" in back.only.content
    missing = await harness.command("admin restore", ADMIN, submission_id=424242)
    assert_private_error(missing, "Not found", "there is no submission 424242")


async def test_invite_codes_and_join(harness, app, clock):
    await create_board(app, clock)
    closed = await harness.command("admin close", ADMIN, leaderboard="identity")
    assert "invite-only" in closed.only.content
    minted = await harness.command("admin invites", ADMIN, leaderboard="identity", mint=1, uses=1)
    code = next(line for line in minted.only.content.splitlines() if line.startswith("inv_"))
    joined = await harness.command("join", ALICE, code=code)
    assert joined.only.ephemeral and "You joined **identity**" in joined.only.content
    reused = await harness.command("join", BOB, code=code)
    assert_private_error(reused, "Invite refused", "used as often as it may be")
    listing = await harness.command("admin invites", ADMIN, leaderboard="identity")
    assert f"{code}  1/1 used" in listing.only.content
    revoked = await harness.command("admin revoke-invite", ADMIN, code=code)
    assert f"Revoked `{code}`" in revoked.only.content
    opened = await harness.command("admin open", ADMIN, leaderboard="identity")
    assert "open to everyone" in opened.only.content


async def test_quota_overrides(harness, app, clock):
    set_ = await harness.command("admin quota", ADMIN, user=ALICE, per_hour=7)
    assert f"Quotas of <@{ALICE.id}>: per hour 7, daily default." in set_.only.content
    cleared = await harness.command("admin quota", ADMIN, user=ALICE, clear=True)
    assert "has the deployment's quotas" in cleared.only.content


async def test_quota_without_values_shows_what_holds_as_the_cli_does(harness, app, clock):
    """`/admin quota user` alone is the CLI's `admin quota USER`: the limits that hold for
    the user now and whose they are (rendering/ops.format_user_quotas, the same text)."""
    unknown = await harness.command("admin quota", ADMIN, user=BOB)
    assert_private_error(unknown, "Not found", f"there is no user '{BOB.id}'")
    alice = Submitter(str(ALICE.id), ALICE.name)
    await app.service.controls.set_quota(alice, per_hour=None, daily=3, actor="org")
    shown = await harness.command("admin quota", ADMIN, user=ALICE)
    text = shown.only.content
    assert shown.only.ephemeral and text.startswith("```\n") and text.endswith("\n```")
    cli_text = format_user_quotas((await app.service.controls.quota_of(str(ALICE.id))).to_json())
    assert text == f"```\n{cli_text}\n```"
    assert f"quotas of {ALICE.id} (alice):" in text
    assert "daily, all leaderboards: 3 (custom)" in text and "set by org" in text
    assert "(deployment's)" in text  # the hourly limit is not hers
    assert (
        await app.service.controls.quota_of(str(ALICE.id))
    ).custom is not None  # nothing changed


async def test_status_lists_pauses_bans_custom_quotas_and_channel_policies(harness, app, clock):
    """`/admin status` shows what the CLI's `admin status` shows (format_controls)."""
    await create_board(app, clock)
    await app.service.controls.pause("identity", "task fix", "org")
    await app.service.controls.ban(Submitter("77", "mallory"), "spam", "org")
    await app.service.controls.set_quota(
        Submitter(str(ALICE.id), "alice"), per_hour=9, daily=None, actor="org"
    )
    await app.service.controls.set_channel_policy("identity", "none", "org")
    await app.service.controls.set_after_deadline_runs("identity", False, "org")
    status = await harness.command("admin status", ADMIN)
    assert status.only.ephemeral
    assert status.only.content.splitlines() == [
        "⏸ paused identity: task fix (org)",
        "⛔ 77 (mallory) banned: spam (org)",
        f"🎚 {ALICE.id} (alice) quotas: per hour 9, daily default (org)",
        "📣 identity's channel policy none: no submission (org)",
        "⏰ identity takes no runs after its deadline (org)",
    ]


async def test_rerun_answers_privately(harness, app, clock):
    from tests.storage.helpers import finish_submission

    await create_board(app, clock)
    receipt = await app.service.submissions.submit(
        "identity", Submitter("1001", "alice"), "s.py", SOLUTION, mode=Mode.LEADERBOARD
    )
    await finish_submission(app.pool, receipt, 1e-6)
    reply = await harness.command("admin rerun", ADMIN, leaderboard="identity", user=ALICE)
    assert (
        reply.only.ephemeral
        and "1 ranked submission of identity queued again" in reply.only.content
    )
