"""A submission's output is its author's: the status, the report, its log and files reach
only them (ephemeral, then by direct message); the channel sees only what the leaderboard's
channel policy publishes (by default a ranked submission's verdict and places:
`test_channel_policy.py`), and, where no private place is left, where to fetch the report."""

from __future__ import annotations

import asyncio

import pytest

from tests.discord.conftest import ADMIN, ALICE, BOB, SOLUTION, create_board
from tests.discord.test_errors import assert_private_error


@pytest.mark.reliability(
    "Access",
    "a test-mode submission in Discord (its output may hold the author's tuning parameters)",
    "its status, report and log are the submitter's own (ephemeral); the channel sees nothing",
)
async def test_a_test_run_shows_nothing_in_the_channel(make_harness, app, clock):
    await create_board(app, clock, gpus=("H100",))
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", mode="test"
    )
    ack, status, report = reply.messages
    assert all(m.ephemeral for m in (ack, status, report))
    assert "submission-1.txt" in report.files
    assert harness.fake.channel_messages() == []


@pytest.mark.reliability(
    "Faults",
    "a submission outliving its 15-minute interaction token, from a member who takes no "
    "direct messages from the bot",
    "one channel note tells them the submission goes on and how to fetch its report; "
    "/leaderboard get-submission gives it (report, log, code) to them and admins only",
)
async def test_without_direct_messages_the_report_can_be_fetched(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9  # runs stay running until released below
    harness = await make_harness(scheduler=True)
    harness.fake.dms_closed.add(ALICE.id)
    reply, tasks = await harness.submit_held(fake_launcher)
    harness.fake.expire(reply.token)
    for run in fake_launcher.runs.values():
        run.polls_left = 1
    await harness._finish(tasks, 30)

    (note,) = harness.fake.channel_messages()
    assert f"<@{ALICE.id}>" in note.content
    assert "`/leaderboard get-submission 1` shows its report" in note.content
    fetched = await harness.command("leaderboard get-submission", ALICE, submission_id=1)
    message = fetched.only
    assert message.ephemeral and message.embeds[0]["title"] == "✅ Submission #1: passed"
    assert set(message.files) == {"submission-1.txt", "s.py"}
    assert message.files["s.py"] == SOLUTION
    refused = await harness.command("leaderboard get-submission", BOB, submission_id=1)
    assert_private_error(refused, "there is no submission 1")
    admin = await harness.command("leaderboard get-submission", ADMIN, submission_id=1)
    assert admin.only.ephemeral and "s.py" in admin.only.files


@pytest.mark.reliability(
    "Faults",
    "the bot restarting while a member's submission runs (its status and report were theirs "
    "to see in the command's interaction, now gone)",
    "the new bot takes the follow up in a direct message, marked as resumed, and sends the "
    "report when the submission is done; a member without DMs gets the channel note",
)
@pytest.mark.parametrize("dms", ["open", "closed"])
async def test_a_restart_mid_run_ends_with_the_report(make_harness, app, clock, fake_launcher, dms):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9
    first = await make_harness(scheduler=True)
    if dms == "closed":
        first.fake.dms_closed.add(ALICE.id)
    await first.submit_held(fake_launcher)
    await first.close()  # the bot dies mid-run: its follow was not reported
    follows = await app.pool.fetchval("SELECT count(*) FROM discord_follows")
    assert follows == 1, "the closed bot's follow went on and reported the submission"

    for run in fake_launcher.runs.values():
        run.polls_left = 1
    fake_launcher.polls = 1
    second = await make_harness(scheduler=True)  # takes the job over once its lease runs out

    async def reported() -> bool:
        return await app.pool.fetchval("SELECT count(*) FROM discord_follows") == 0

    for _ in range(600):
        if await reported():
            break
        await asyncio.sleep(0.1)
    assert await reported()
    if dms == "open":
        sent = second.fake.direct_messages(ALICE.id)
        assert len(sent) == 2, [(m.channel_id, m.content) for m in second.fake.messages.values()]
        status, report = sent
        assert "🔁 The bot restarted" in status.content and "🏁 Done in" in status.content
        assert report.embeds[0]["title"] == "✅ Submission #1: passed"
    else:
        (note,) = second.fake.channel_messages()
        assert "`/leaderboard get-submission 1` shows its report" in note.content
