"""The longest answers of `/admin ...` (see `test_limits.py`): 500 invite codes, 200 paused
leaderboards with their policies, 40 bans and 200 custom quotas, long unicode names, and
6,000-character reasons and codes echoed back."""

from __future__ import annotations

from typing import Any

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.discord.replies import MESSAGE_CHARS
from cluster_manager.service import Submitter
from cluster_manager.service.controls import MAX_REASON_CHARS
from cluster_manager.service.invites import MAX_MINTED
from tests.discord.conftest import ADMIN, ALICE, SOLUTION, Member, create_board
from tests.discord.test_limits import LONG_NAME, LONGEST_OPTION, many_boards, whole
from tests.storage.helpers import finish_submission

LONG_REASON = ("the same generated kernel, posted again and again; " * 120)[:LONGEST_OPTION]


async def invites(harness, app, clock, **_) -> str:
    await create_board(app, clock)
    await app.service.invites.set_closed("identity", True)
    minted = await harness.command("admin invites", ADMIN, leaderboard="identity", mint=MAX_MINTED)
    assert minted.only.content.startswith(f"🎟️ {MAX_MINTED} codes for identity:")
    codes = whole(minted.only, "identity-new-invites.txt").splitlines()
    assert len(set(codes)) == MAX_MINTED and all(c.startswith("inv_") for c in codes)
    await app.service.invites.revoke(codes[0])
    listed = whole(
        (await harness.command("admin invites", ADMIN, leaderboard="identity")).only,
        "identity-invites.txt",
    )
    assert all(code in listed for code in codes) and f"{codes[0]}  revoked" in listed
    return f"{MAX_MINTED} codes minted and listed, attached"


async def status(harness, app, clock, **_) -> str:
    names = await many_boards(app, clock, 200)
    for name in names:
        await app.service.controls.pause(name, LONG_REASON, "discord:" + LONG_NAME)
        await app.service.controls.set_channel_policy(name, "none", "discord:root")
    for i in range(40):
        who = Submitter(f"spam-{i}", f"{i} {LONG_NAME}")
        await app.service.controls.ban(who, LONG_REASON, "test")
    for i in range(200):
        who = Submitter(f"team-{i}", f"{i} {LONG_NAME}")
        await app.service.controls.set_quota(who, per_hour=100 + i, daily=None, actor="test")
    text = whole((await harness.command("admin status", ADMIN)).only, "status.txt")
    lines = text.splitlines()
    assert sum(line.startswith("⏸ paused ") for line in lines) == 200
    assert sum(" banned: " in line for line in lines) == 40
    assert sum(" quotas: per hour " in line for line in lines) == 200
    assert all(f"📣 {n}'s channel policy none" in text for n in names)
    return f"{len(lines)} lines, attached"


async def stats(harness, app, clock, **_) -> str:
    await create_board(app, clock, gpus=("CPU", "H100"))
    for i in range(30):
        receipt = await app.service.submissions.submit(
            "identity",
            Submitter(f"u{i}", LONG_NAME),
            "s.py",
            SOLUTION,
            gpus=["CPU", "H100"],
            mode=Mode.TEST,
        )
        await finish_submission(app.pool, receipt, None, passed=i % 2 == 0)
    text = (await harness.command("admin stats", ADMIN)).only.content
    assert "30 submissions from 30 users" in text and "H100" in text
    return "the table"


async def quota(harness, app, clock, **_) -> str:
    member = Member(4242, "ʕ•ᴥ•ʔ" * 8)
    await app.service.controls.set_quota(
        Submitter(str(member.id), member.name), per_hour=5, daily=7, actor=LONG_NAME
    )
    text = (await harness.command("admin quota", ADMIN, user=member)).only.content
    assert f"quotas of {member.id} ({member.name}):" in text and f"set by {LONG_NAME}" in text
    return "a user's quotas"


async def echoed(harness, app, clock, **_) -> str:
    """Answers that echo what the admin typed keep its start (the service keeps the reasons'
    first 500 characters)."""
    await create_board(app, clock)
    receipt = await app.service.submissions.submit(
        "identity", Submitter(str(ALICE.id), ALICE.name), "s.py", SOLUTION, mode=Mode.TEST
    )
    replies = {
        "invalidate": await harness.command(
            "admin invalidate", ADMIN, submission_id=receipt.submission_id, reason=LONG_REASON
        ),
        "pause": await harness.command("admin pause", ADMIN, reason=LONG_REASON),
        "ban": await harness.command("admin ban", ADMIN, user=ALICE, reason=LONG_REASON),
        "revoke-invite": await harness.command(
            "admin revoke-invite", ADMIN, code="c" * LONGEST_OPTION
        ),
        "close": await harness.command("admin close", ADMIN, leaderboard="n" * LONGEST_OPTION),
    }
    for name, reply in replies.items():
        message = reply.only
        assert message.ephemeral and len(message.content) <= MESSAGE_CHARS, name
    assert "out of the rankings: the same generated kernel" in replies["invalidate"].only.content
    stored = (await app.service.submissions.report(receipt.submission_id)).submission.invalidated
    assert stored is not None and len(stored) <= MAX_REASON_CHARS + len(" (discord:root)")
    assert "Not found" in replies["close"].only.content
    return "5 answers echoing 6,000-character options, cut"


ADMIN_CASES = {
    "admin invites": invites,
    "admin status": status,
    "admin stats": stats,
    "admin quota": quota,
    "admin invalidate": echoed,
    "admin pause": echoed,
    "admin ban": echoed,
    "admin revoke-invite": echoed,
}


@pytest.mark.reliability(
    "Faults",
    "the longest answer of an /admin command, with the most data it can meet",
    "Discord accepts every message; the whole content is there, attached when long",
)
@pytest.mark.parametrize("case", [invites, status, stats, quota, echoed], ids=lambda f: f.__name__)
async def test_the_longest_admin_answer_fits(case: Any, harness, app, clock, record_property):
    record_property("observed", await case(harness, app=app, clock=clock))
    assert not harness.fake.refused
