"""Who may create, delete and resync: roles from the guild, checked before anything runs."""

from __future__ import annotations

import pytest

from cluster_manager.service import NotFoundError
from tests.discord.conftest import ADMIN, ALICE, BOB, CREATOR, GUILD_ID, create_board, task_zip


@pytest.mark.reliability(
    "Access",
    "/leaderboard create by a member without the Admin or Creator role",
    "refused before anything runs (private 'Missing role'); the task is never downloaded",
)
async def test_create_without_a_role_is_refused_at_once(harness, record_property):
    task = harness.upload("task.zip", task_zip())
    reply = await harness.command(
        "leaderboard create", ALICE, name="mine", deadline="2031-01-01", task=task
    )
    message = reply.only
    record_property(
        "observed",
        f"{message.content!r} (ephemeral: {message.ephemeral}); "
        f"{len(harness.fake.downloads())} download",
    )
    assert message.ephemeral
    assert "Missing role" in message.content
    assert "Leaderboard Admin" in message.content and "Leaderboard Creator" in message.content
    # Refused by the check: answered directly, without deferring or downloading.
    (callback,) = harness.fake.calls("POST", rf"/interactions/\d+/{reply.token}/callback")
    assert callback.body["type"] == 4
    assert harness.fake.downloads() == []


async def test_a_creator_creates_a_leaderboard_choosing_its_gpus(harness, app):
    task = harness.upload("task.zip", task_zip())
    reply, tasks = harness.start(
        "leaderboard create", CREATOR, name="identity-2", deadline="2031-06-30T12:00", task=task
    )
    menu = await harness.fake.wait_for(lambda: [m for m in reply.messages if m.components])
    assert menu[0].ephemeral and "Which GPUs" in menu[0].content
    await harness.click(menu[0], "Choose the GPU types", CREATOR, values=["CPU", "H100"])
    await harness._finish(tasks, 10)

    board = await app.service.leaderboards.get("identity-2")
    assert board.gpus == ("CPU", "H100")
    assert board.creator == str(CREATOR.id)
    assert board.deadline.isoformat() == "2031-06-30T12:00:00+00:00"
    (message,) = reply.messages
    assert "Created **identity-2** on CPU, H100" in message.content
    assert message.components == []  # the menu is gone


@pytest.mark.reliability(
    "Access",
    "/leaderboard delete of someone else's leaderboard by a member who is not an admin",
    "refused ('Not allowed'), no confirmation offered; the leaderboard stays",
)
async def test_delete_by_someone_else_is_refused(harness, app, clock, record_property):
    await create_board(app, clock, creator=ALICE)
    reply = await harness.command("leaderboard delete", BOB, name="identity")
    message = reply.only
    record_property("observed", f"{message.content!r} (ephemeral: {message.ephemeral})")
    assert message.ephemeral and "Not allowed" in message.content
    assert not message.components  # no confirmation was offered
    await app.service.leaderboards.get("identity")  # still there


@pytest.mark.reliability(
    "Access",
    "another member clicks Confirm on someone's delete prompt",
    "refused ('someone else'), privately; only the asker's Confirm deletes",
)
@pytest.mark.parametrize("member", [ALICE, ADMIN], ids=["creator", "admin"])
async def test_the_creator_or_an_admin_deletes_after_confirming(
    harness, app, clock, member, record_property
):
    await create_board(app, clock, creator=ALICE)
    reply, tasks = harness.start("leaderboard delete", member, name="identity")
    (prompt,) = await harness.fake.wait_for(lambda: [m for m in reply.messages if m.components])
    assert prompt.ephemeral and "Delete **identity**" in prompt.content

    # Only the one who asked can confirm.
    intruder = await harness.click(prompt, "Confirm", BOB)
    record_property(
        "observed",
        f"{intruder.only.content!r} (ephemeral: {intruder.only.ephemeral}); board kept until "
        "the asker confirmed",
    )
    assert "someone else" in intruder.only.content and intruder.only.ephemeral
    await app.service.leaderboards.get("identity")

    await harness.click(prompt, "Confirm", member)
    await harness._finish(tasks, 10)
    assert "Deleted **identity**" in reply.only.content
    with pytest.raises(NotFoundError):
        await app.service.leaderboards.get("identity")


async def test_cancel_keeps_the_leaderboard(harness, app, clock):
    await create_board(app, clock)
    reply, tasks = harness.start("leaderboard delete", ADMIN, name="identity")
    (prompt,) = await harness.fake.wait_for(lambda: [m for m in reply.messages if m.components])
    await harness.click(prompt, "Cancel", ADMIN)
    await harness._finish(tasks, 10)
    assert "Cancelled" in reply.only.content
    await app.service.leaderboards.get("identity")


@pytest.mark.reliability(
    "Access",
    "/resync by a Leaderboard Creator (not an Admin)",
    "refused ('Missing role'); no commands are synced",
)
async def test_resync_is_for_admins_only(harness, record_property):
    refused = await harness.command("resync", CREATOR)
    record_property(
        "observed",
        f"{refused.only.content!r}; {len(harness.fake.calls('PUT', r'/commands$'))} sync request",
    )
    assert refused.only.ephemeral and "Missing role" in refused.only.content
    assert "Leaderboard Admin" in refused.only.content
    assert not harness.fake.calls("PUT", r"/commands$")

    reply = await harness.command("resync", ADMIN)
    (sync,) = harness.fake.calls("PUT", rf"/applications/\d+/guilds/{GUILD_ID}/commands$")
    assert sorted(c["name"] for c in sync.body) == [
        "admin",
        "join",
        "leaderboard",
        "ping",
        "queue",
        "resync",
        "run",
        "team",
        "token",
        "verifydb",
        "verifyruns",
    ]
    assert reply.only.ephemeral and "Synced 11 commands to this server" in reply.only.content


@pytest.mark.reliability(
    "Access",
    "/verifyruns by a member without the Admin role",
    "refused ('Missing role'); nothing is run",
)
async def test_verifyruns_is_for_admins_only(harness, record_property):
    reply = await harness.command("verifyruns", ALICE)
    record_property("observed", f"{reply.only.content!r} (ephemeral: {reply.only.ephemeral})")
    assert reply.only.ephemeral and "Missing role" in reply.only.content
