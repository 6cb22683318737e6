"""A leaderboard's channel policy: what the channel sees of its submissions. `/admin
channel-policy` sets it (Leaderboard Admins, a private answer); whatever it is, a submission's
status, report, log and files stay its submitter's own, and the channel never sees output."""

from __future__ import annotations

import pytest

from cluster_manager.core.models import RunRequest, Verdict
from cluster_manager.core.records import ChannelPolicy
from cluster_manager.core.run_results import RunResult
from cluster_manager.service import Submitter
from tests.discord.conftest import ADMIN, ALICE, SOLUTION, create_board
from tests.discord.test_errors import assert_private_error
from tests.support.fakes import SANDBOXED, passing

HEAD = "**Alice**'s {mode} submission #{id} to **identity**"
# What each policy shows the channel of: a passing test run (#1), a passing ranked one (#2)
# and a failing benchmark (#3).
TEST_LINE = "✅ " + HEAD.format(mode="test", id=1) + " passed."
RANKED_LINE = (
    "✅ " + HEAD.format(mode="ranked", id=2) + " passed: H100 rank #1 with 1 ms"
    " (the slower of its public and secret runs), a new personal best."
)
FAILED_LINE = "❌ " + HEAD.format(mode="benchmark", id=3) + " did not pass."
SEEN = {
    "ranked": [RANKED_LINE],
    "none": [],
    "all": [TEST_LINE, RANKED_LINE, FAILED_LINE],
}
# Output a run printed, which no channel line may show.
SECRET_OUTPUT = "tuned: BLOCK=128 WARPS=8"


def _outcome(request: RunRequest) -> RunResult:
    if request.mode.value == "benchmark":
        return RunResult(False, Verdict.RUNTIME_ERROR, request.mode, SECRET_OUTPUT)
    found = passing(request)
    return RunResult(
        True, Verdict.PASSED, request.mode, SECRET_OUTPUT, score=found.score, system=SANDBOXED
    )


async def _submit_three(harness) -> list:
    """ALICE's test, ranked and (failing) benchmark submissions, each followed to its report:
    every message of theirs is private."""
    replies = []
    for mode in ("test", "leaderboard", "benchmark"):
        reply = await harness.command(
            "leaderboard submit",
            ALICE,
            script=harness.upload("s.py", SOLUTION),
            leaderboard="identity",
            mode=mode,
        )
        ack, status, report = reply.messages
        assert all(m.ephemeral for m in (ack, status, report)), mode
        assert "🏁 Done in" in status.content and report.embeds
        replies.append(reply)
    return replies


@pytest.mark.reliability(
    "Access",
    "a leaderboard's channel policy set to ranked (the default), none or all, then a test, a "
    "ranked and a failing benchmark submission in Discord",
    "the channel sees, per policy, a ranked one's line, nothing, or every one's verdict "
    "line; never output; status, report and log stay private",
)
@pytest.mark.parametrize("policy", ["ranked", "none", "all"])
async def test_the_channel_sees_what_the_policy_says(
    make_harness, app, clock, fake_launcher, policy
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.outcome = _outcome
    harness = await make_harness(scheduler=True)
    set_ = await harness.command(
        "admin channel-policy", ADMIN, leaderboard="identity", policy=policy
    )
    assert set_.only.ephemeral
    assert f"**identity**'s channel policy is {policy}: the channel sees " in set_.only.content
    board = await app.service.leaderboards.get("identity")
    assert board.channel_policy is ChannelPolicy(policy)

    replies = await _submit_three(harness)

    public = harness.fake.channel_messages()
    assert [m.content for m in public] == SEEN[policy]
    assert all(not m.embeds and not m.files for m in public)
    assert not any(SECRET_OUTPUT in m.text() for m in public)
    # What is private is the same under every policy: the report and its log.
    log = replies[2].messages[2].files["submission-3.txt"].decode()
    assert SECRET_OUTPUT in log


async def test_the_default_policy_is_ranked_and_is_read_with_the_leaderboard(harness, app, clock):
    await create_board(app, clock)
    board = await app.service.leaderboards.get("identity")
    assert board.channel_policy is ChannelPolicy.RANKED
    assert await app.service.controls.channel_policies() == []


async def test_setting_it_records_who_and_shows_in_admin_status(harness, app, clock):
    await create_board(app, clock)
    await harness.command("admin channel-policy", ADMIN, leaderboard="identity", policy="all")
    (setting,) = await app.service.controls.channel_policies()
    assert (setting.leaderboard, setting.policy, setting.set_by) == (
        "identity",
        "all",
        "discord:root",
    )
    assert setting.set_at == clock.now
    status = await harness.command("admin status", ADMIN)
    assert "📣 identity's channel policy all: every submission's verdict (discord:root)" in (
        status.only.content
    )
    back = await harness.command(
        "admin channel-policy", ADMIN, leaderboard="identity", policy="ranked"
    )
    assert "the channel sees a ranked submission's verdict and places" in back.only.content
    assert await app.service.controls.channel_policies() == []  # the default is not listed


async def test_leaderboards_autocomplete_and_an_unknown_one_is_refused_privately(
    harness, app, clock
):
    await create_board(app, clock)
    await create_board(app, clock, "other")
    choices = await harness.autocomplete(
        "admin channel-policy", "leaderboard", ADMIN, leaderboard="ide", policy="all"
    )
    assert choices == ["identity"]
    missing = await harness.command("admin channel-policy", ADMIN, leaderboard="nope", policy="all")
    assert_private_error(missing, "Not found")
    assert await app.service.controls.channel_policies() == []


@pytest.mark.reliability(
    "Access",
    "an invite-only leaderboard whose channel policy is all, and a member's ranked submission",
    "the channel sees nothing of it (a line would name the board and its ranking); the "
    "admin is told so when setting the policy",
)
async def test_an_invite_only_leaderboard_posts_nothing_whatever_its_policy(
    make_harness, app, clock
):
    await create_board(app, clock, gpus=("H100",))
    await app.service.invites.set_closed("identity", True)
    (code,) = await app.service.invites.mint("identity", 1, 1, "org")
    await app.service.invites.join(code, Submitter(str(ALICE.id), ALICE.name))
    harness = await make_harness(scheduler=True)
    set_ = await harness.command(
        "admin channel-policy", ADMIN, leaderboard="identity", policy="all"
    )
    assert "identity is invite-only: its channel sees none of its submissions" in (
        set_.only.content
    )
    reply = await harness.command(
        "leaderboard submit", ALICE, script=harness.upload("s.py", SOLUTION), leaderboard="identity"
    )
    assert reply.messages[2].embeds[0]["title"] == "✅ Submission #1: passed"
    assert harness.fake.channel_messages() == []
