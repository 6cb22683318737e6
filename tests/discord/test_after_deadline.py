"""Runs after a leaderboard's deadline in Discord: `/leaderboard submit` offers and takes an
ended leaderboard while its organisers allow it (`/admin after-deadline`), the submitter is
told privately that the run ranks only among the runs after the deadline, the channel sees
nothing of it, and `/leaderboard show after_deadline:True` is that ranking."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cluster_manager.discord.render import AFTER_DEADLINE_NOTE
from tests.discord.conftest import ADMIN, ALICE, BOB, SOLUTION, create_board
from tests.discord.test_errors import assert_private_error, stored

TAB_TITLE = "🏆 identity on H100 — runs after the deadline"
IN_TIME_LINE = (
    "✅ **Alice**'s ranked submission #1 to **identity** passed: H100 rank #1 with 1 ms"
    " (the slower of its public and secret runs), a new personal best."
)


async def _submit(harness, member, mode: str = "leaderboard"):
    return await harness.command(
        "leaderboard submit",
        member,
        script=harness.upload("s.py", SOLUTION),
        leaderboard="identity",
        mode=mode,
    )


@pytest.fixture
async def ended(make_harness, app, clock):
    """identity on H100 with Alice's ranked run in time (the channel saw its line), and its
    deadline passed a day ago."""
    await create_board(app, clock, gpus=("H100",))
    harness = await make_harness(scheduler=True)
    await _submit(harness, ALICE)
    assert [m.content for m in harness.fake.channel_messages()] == [IN_TIME_LINE]
    clock.now += timedelta(days=4)
    return harness


async def _offered(harness, typed: str = "ide") -> list[tuple[str, str]]:
    """The (shown name, value) of each leaderboard `/leaderboard submit` offers Alice."""
    reply, tasks = harness.start(
        "leaderboard submit", ALICE, focused="leaderboard", leaderboard=typed
    )
    await harness._finish(tasks, 10)
    return [(c["name"], c["value"]) for c in reply.choices]


@pytest.mark.reliability(
    "Access",
    "a ranked /leaderboard submit to a leaderboard past its deadline that takes runs after it",
    "accepted; status and report privately say it ranks only among the runs after the "
    "deadline; the channel sees nothing of it, whatever its policy",
)
@pytest.mark.parametrize("policy", ["ranked", "all"])
async def test_a_run_after_the_deadline_is_taken_privately_and_the_channel_sees_nothing(
    ended, app, policy
):
    await app.service.controls.set_channel_policy("identity", policy, "org")
    for mode in ("leaderboard", "test"):
        reply = await _submit(ended, BOB, mode)
        ack, status, report = reply.messages
        assert all(m.ephemeral for m in (ack, status, report)), mode
        assert AFTER_DEADLINE_NOTE in ack.content and AFTER_DEADLINE_NOTE in status.content
        assert "🏁 Done in" in status.content
        (embed,) = report.embeds
        assert embed["title"].startswith("✅ Submission #") and embed["title"].endswith("passed")
        assert AFTER_DEADLINE_NOTE in embed["description"]
    assert await stored(app, "submissions") == 3
    assert [m.content for m in ended.fake.channel_messages()] == [IN_TIME_LINE]
    assert not ended.fake.refused


async def test_a_run_in_time_is_not_told_it_is_after_the_deadline(make_harness, app, clock):
    await create_board(app, clock, gpus=("H100",))
    harness = await make_harness(scheduler=True)
    ack, status, report = (await _submit(harness, ALICE)).messages
    assert "accepted" in ack.content
    assert not any(AFTER_DEADLINE_NOTE in m.text() for m in (ack, status, report))


async def test_show_after_deadline_is_the_ranking_of_the_runs_after_it(ended, app):
    empty = await ended.command("leaderboard show", name="identity", after_deadline=True)
    (page,) = empty.only.embeds
    assert page["title"] == TAB_TITLE
    assert page["description"] == "No run after the deadline is ranked yet."

    await _submit(ended, BOB)
    tab = await ended.command("leaderboard show", name="identity", after_deadline=True)
    (page,) = tab.only.embeds
    assert page["title"] == TAB_TITLE
    assert "`#1` bob · **1 ms**" in page["description"] and "alice" not in page["description"]
    assert not tab.only.files  # the chart is the competition's history

    competition = await ended.command("leaderboard show", name="identity")
    (page,) = competition.only.embeds
    assert page["title"] == "🏆 identity on H100"
    assert "`#1` alice · **1 ms**" in page["description"] and "bob" not in page["description"]
    assert "ranking.png" in competition.only.files
    assert not ended.fake.refused


@pytest.mark.reliability(
    "Access",
    "/admin after-deadline turning off, then on, the runs after an ended leaderboard's deadline",
    "off: submit refuses privately with the deadline message and does not offer it; on: it "
    "is offered, marked, and taken",
)
async def test_admin_after_deadline_turns_the_runs_off_and_on(ended, app):
    assert await _offered(ended) == [("identity (after the deadline)", "identity")]

    off = await ended.command("admin after-deadline", ADMIN, leaderboard="identity", allowed=False)
    assert off.only.ephemeral
    assert "**identity** takes no runs after its deadline" in off.only.content
    assert not (await app.service.leaderboards.get("identity")).after_deadline_runs
    assert await _offered(ended) == []
    refused = await _submit(ended, BOB)
    assert_private_error(refused, "Deadline passed", "its organisers take no runs after it")
    assert await stored(app, "submissions") == 1

    on = await ended.command("admin after-deadline", ADMIN, leaderboard="identity", allowed=True)
    assert "**identity** takes runs after its deadline" in on.only.content
    assert (await app.service.leaderboards.get("identity")).after_deadline_runs
    assert await _offered(ended) == [("identity (after the deadline)", "identity")]
    ack = (await _submit(ended, BOB)).messages[0]
    assert AFTER_DEADLINE_NOTE in ack.content
    assert await stored(app, "submissions") == 2


async def test_an_open_leaderboard_is_offered_unmarked_before_an_ended_one(harness, app, clock):
    await create_board(app, clock, "old-identity")
    await app.pool.execute(
        "UPDATE leaderboards SET deadline = $1 WHERE name = 'old-identity'",
        clock.now - timedelta(hours=1),
    )
    await create_board(app, clock)
    assert await _offered(harness, "identity") == [
        ("identity", "identity"),
        ("old-identity (after the deadline)", "old-identity"),
    ]


async def test_admin_after_deadline_is_for_admins_and_names_a_stored_leaderboard(
    harness, app, clock
):
    await create_board(app, clock)
    denied = await harness.command(
        "admin after-deadline", BOB, leaderboard="identity", allowed=False
    )
    assert denied.only.ephemeral and "Missing role" in denied.only.content
    assert (await app.service.leaderboards.get("identity")).after_deadline_runs
    missing = await harness.command(
        "admin after-deadline", ADMIN, leaderboard="nope", allowed=False
    )
    assert_private_error(missing, "Not found")
