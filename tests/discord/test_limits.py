"""Answers that outgrow Discord's 2,000 characters: the fake Discord refuses any message over
its limits (as Discord does), so each of these would fail; they answer with the start of the
list and the whole of it attached."""

from __future__ import annotations

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.discord.replies import MESSAGE_CHARS
from cluster_manager.service import Submitter
from tests.discord.conftest import ADMIN, ALICE, create_board
from tests.discord.test_errors import SOLUTION


def _whole(message, name: str) -> str:
    assert len(message.content) <= MESSAGE_CHARS
    assert f"the whole is attached ({name})" in message.content
    return message.files[name].decode()


@pytest.mark.reliability(
    "Faults",
    "answers longer than Discord allows: 200 invite codes minted and listed, 50 jobs in /queue, "
    "40 bans in /admin status",
    "each answer fits Discord's 2,000 characters and attaches the whole list as a file",
)
async def test_long_lists_fit_and_come_whole_as_a_file(harness, app, clock):
    await create_board(app, clock)
    alice = Submitter(str(ALICE.id), ALICE.name)
    await app.service.set_quota(alice, per_hour=1000, daily=1000, actor="test")
    for _ in range(50):
        await app.service.submit("identity", alice, "submission.py", SOLUTION, mode=Mode.TEST)
    queue = await harness.command("queue", ALICE)
    assert _whole(queue.only, "queue.txt").count("in line") == 50

    await app.service.set_closed("identity", True)
    minted = await harness.command("admin invites", ADMIN, leaderboard="identity", mint=200)
    codes = _whole(minted.only, "identity-new-invites.txt").splitlines()
    assert len(codes) == 200 and all(c.startswith("inv_") for c in codes)
    assert minted.only.content.startswith("🎟️ 200 codes for identity:")
    listed = await harness.command("admin invites", ADMIN, leaderboard="identity")
    assert len(_whole(listed.only, "identity-invites.txt").splitlines()) == 200

    for i in range(40):
        who = Submitter(f"spam-{i}", f"spammer number {i}")
        await app.service.ban_user(who, "posted the same generated kernel again " * 2, "test")
    status = await harness.command("admin status", ADMIN)
    assert _whole(status.only, "status.txt").count("banned:") == 40
