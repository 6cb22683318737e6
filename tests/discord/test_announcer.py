"""New leaders posted to the announcement channel: once per change, not for a leaderboard
seen for the first time, not more often than the gap allows, and never again after a
restart (the bot's memory is the database)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.discord.announcer import Announcer
from cluster_manager.service import Submitter
from tests.discord.conftest import ALICE, BOB, SOLUTION, create_board
from tests.storage.helpers import finish_submission

CHANNEL = 4242


@pytest.fixture(autouse=True)
def no_background_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests make every pass themselves: the bot's own first pass, late on a busy machine,
    would otherwise meet theirs."""

    async def idle(self: Announcer, stop: asyncio.Event) -> None:
        await stop.wait()

    monkeypatch.setattr(Announcer, "run", idle)


async def rank(app, user: str, score: float) -> None:
    receipt = await app.service.submissions.submit(
        "identity", Submitter(user, user), "submission.py", SOLUTION, mode=Mode.LEADERBOARD
    )
    await finish_submission(app.pool, receipt, score)


def posted(fake) -> list[str]:
    return [m.content for m in fake.channel_messages() if m.channel_id == CHANNEL]


@pytest.mark.reliability(
    "Faults",
    "the bot restarted after announcing new leaders (a second bot on the same database), and "
    "two changes within the announcement gap",
    "each change of the top three is posted once; the restarted bot repeats nothing",
)
async def test_new_leaders_are_announced_once_even_across_a_restart(
    make_harness, fake_discord, app, clock
):
    harness = await make_harness(announce_channel_id=CHANNEL, announce_min_gap_s=0.0)
    announcer = harness.bot.announcer
    await create_board(app, clock)
    assert await announcer.announce_once() == 0  # first seen: recorded, not announced
    await rank(app, str(ALICE.id), 3e-6)
    assert await announcer.announce_once() == 1
    (first,) = posted(fake_discord)
    assert "New leaders on **identity** (CPU)" in first and f"🥇 <@{ALICE.id}> · 3 µs" in first
    assert await announcer.announce_once() == 0  # nothing changed

    await rank(app, str(BOB.id), 2e-6)
    assert await announcer.announce_once() == 1
    second = posted(fake_discord)[1]
    assert f"🥇 <@{BOB.id}> · 2 µs" in second and f"🥈 <@{ALICE.id}>" in second
    assert f"<@{BOB.id}> takes first place from <@{ALICE.id}>" in second

    restarted = await make_harness(announce_channel_id=CHANNEL, announce_min_gap_s=0.0)
    assert await restarted.bot.announcer.announce_once() == 0
    assert len(posted(fake_discord)) == 2
    sent = fake_discord.calls("POST", rf"/channels/{CHANNEL}/messages$")
    assert all(call.body.get("allowed_mentions", {}).get("parse") == [] for call in sent)


async def test_changes_within_the_gap_wait_for_it(make_harness, fake_discord, app, clock):
    harness = await make_harness(announce_channel_id=CHANNEL, announce_min_gap_s=300.0)
    announcer = harness.bot.announcer
    await create_board(app, clock)
    await announcer.announce_once()
    await rank(app, "carol", 3e-6)
    assert await announcer.announce_once() == 1  # the first change: at once
    await rank(app, "dave", 2e-6)
    assert await announcer.announce_once() == 0
    clock.now += timedelta(minutes=6)
    assert await announcer.announce_once() == 1
    assert "dave" in posted(fake_discord)[-1]
