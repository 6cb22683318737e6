"""Bad inputs: each one gets its own ephemeral message, and nothing is done or downloaded."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from cluster_manager.cli.logs import RedactingFilter
from cluster_manager.core.models import Mode
from cluster_manager.service import Submitter
from tests.conftest import CORRECT
from tests.discord.conftest import BOB, CREATOR, SOLUTION, create_board, task_zip


def assert_private_error(reply, *texts: str) -> None:
    message = reply.only
    assert message.ephemeral, message.text()
    for text in texts:
        assert text in message.content, message.content
    assert reply.acknowledged


def seen(reply) -> str:
    """Everything the user was shown, for the reliability page."""
    return " / ".join(m.text() for m in reply.messages)


async def stored(app, table: str) -> int:
    return await app.pool.fetchval(f"SELECT count(*) FROM {table}")


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit to an unknown leaderboard",
    "private error naming the leaderboard ('no leaderboard named 'nope''); nothing stored",
)
async def test_unknown_leaderboard(harness, app, record_property):
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="nope")
    record_property("observed", seen(reply))
    assert_private_error(reply, "Not found", "there is no leaderboard named 'nope'")
    assert await stored(app, "submissions") == 0


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard show of an unknown leaderboard (a public command)",
    "nothing public is shown; a private error names the leaderboard",
)
async def test_unknown_leaderboard_in_a_public_command_stays_private(harness, record_property):
    reply = await harness.command("leaderboard show", name="nope")
    record_property("observed", seen(reply))
    # The board is looked up before the public "thinking…": the channel sees nothing.
    assert_private_error(reply, "Not found", "'nope'")
    assert all(m.ephemeral for m in reply.messages)


async def test_a_public_command_failing_after_thinking_removes_the_public_message(
    harness, app, clock
):
    await create_board(app, clock)
    reply = await harness.command("leaderboard show", name="identity", gpu="NOPE")
    assert_private_error(reply, "NOPE")
    assert harness.fake.calls("DELETE", r"/messages/@original$")


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit after the deadline of a leaderboard that takes no runs after it",
    "private 'Deadline passed' error naming the leaderboard; nothing stored",
)
async def test_deadline_passed(harness, app, clock, record_property):
    await create_board(app, clock)
    await app.service.controls.set_after_deadline_runs("identity", False, "org")
    clock.now += timedelta(days=4)
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    record_property("observed", seen(reply))
    assert_private_error(reply, "Deadline passed", "the deadline of 'identity' passed")
    assert await stored(app, "submissions") == 0


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit for a GPU the leaderboard does not run on",
    "private 'GPU not allowed' error listing the GPUs to choose from; nothing stored",
)
async def test_gpu_not_allowed(harness, app, clock, record_property):
    await create_board(app, clock)
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", gpu="H100"
    )
    record_property("observed", seen(reply))
    assert_private_error(reply, "GPU not allowed", "does not run on 'H100'; choose from CPU")
    assert await stored(app, "submissions") == 0


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit with a .txt file",
    "private 'Wrong file type' error naming the file; the file is never downloaded",
)
async def test_wrong_file_type_is_refused_before_downloading(harness, app, clock, record_property):
    await create_board(app, clock)
    script = harness.upload("kernel.txt", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    record_property("observed", seen(reply))
    assert_private_error(reply, "Wrong file type", "kernel.txt")
    assert harness.fake.downloads() == []


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit with a 10 MB file",
    "private 'File too large' error from its declared size; never downloaded",
)
async def test_a_file_over_the_limit_is_refused_by_its_size_without_downloading(
    harness, app, clock, record_property
):
    await create_board(app, clock)
    script = harness.upload("submission.py", SOLUTION, size=10_000_000)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    record_property("observed", seen(reply))
    assert_private_error(
        reply, "File too large", "is 9.5 MiB, over the 256 KiB limit for a submission"
    )
    assert harness.fake.downloads() == []


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit with a file lacking custom_kernel",
    "private 'Invalid submission' error naming the problem; nothing stored",
)
async def test_an_invalid_submission_names_its_problem(harness, app, clock, record_property):
    await create_board(app, clock)
    script = harness.upload("submission.py", b"def kernel(data):\n    return data\n")
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    record_property("observed", seen(reply))
    assert_private_error(reply, "Invalid submission", "no top-level `def custom_kernel(data)`")
    assert await stored(app, "submissions") == 0


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit naming no leaderboard, in the command or a header",
    "private error explaining `#!POPCORN leaderboard NAME`",
)
async def test_no_leaderboard_named_anywhere(harness, record_property):
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script)
    record_property("observed", seen(reply))
    assert_private_error(reply, "#!POPCORN leaderboard NAME")


async def test_rate_limited_with_the_time_to_wait(harness, app, clock):
    await create_board(app, clock, rate_limit=1)
    await app.service.submissions.submit(
        "identity",
        Submitter(str(BOB.id), BOB.name),
        "s.py",
        CORRECT.encode(),
        mode=Mode.LEADERBOARD,
    )
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command(
        "leaderboard submit", BOB, script=script, leaderboard="identity", mode="leaderboard"
    )
    assert_private_error(
        reply, "Rate limited", "1 ranked submissions per hour", "try again in 60 min"
    )
    assert "<t:" in reply.only.content  # and when, in the reader's time zone


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"name": "new-board", "deadline": "next tuesday"}, "Invalid deadline"),
        ({"name": "Bad Name!", "deadline": "2031-01-01"}, "Invalid name"),
    ],
    ids=["deadline-next-tuesday", "name-Bad-Name!"],
)
@pytest.mark.reliability(
    "Bad input",
    "/leaderboard create with an unparseable deadline or a bad name",
    "private 'Invalid deadline' / 'Invalid name' error; no leaderboard stored",
)
async def test_bad_create_options(harness, app, options, expected, record_property):
    task = harness.upload("task.zip", task_zip())
    reply = await harness.command("leaderboard create", CREATOR, task=task, **options)
    record_property("observed", seen(reply))
    assert_private_error(reply, expected)
    assert await stored(app, "leaderboards") == 0


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard create with a task.zip that is not a zip",
    "private 'Invalid task' error, 'not a valid zip archive'; no leaderboard stored",
)
async def test_bad_zip(harness, app, record_property):
    task = harness.upload("task.zip", b"this is not a zip at all")
    reply = await harness.command(
        "leaderboard create", CREATOR, name="broken", deadline="2031-01-01", task=task
    )
    record_property("observed", seen(reply))
    assert_private_error(reply, "Invalid task", "not a valid zip archive")
    assert await stored(app, "leaderboards") == 0


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard create with a task.tar.gz",
    "private 'Wrong file type' error, 'must be a .zip file'; never downloaded",
)
async def test_a_task_that_is_not_a_zip_is_not_downloaded(harness, record_property):
    task = harness.upload("task.tar.gz", b"...")
    reply = await harness.command(
        "leaderboard create", CREATOR, name="broken", deadline="2031-01-01", task=task
    )
    record_property("observed", seen(reply))
    assert_private_error(reply, "Wrong file type", "must be a .zip file")
    assert harness.fake.downloads() == []


@pytest.mark.reliability(
    "Bad input",
    "/run on an unknown GPU type (TPU)",
    "private 'Unknown GPU' error: 'unknown GPU type 'TPU''",
)
async def test_unknown_gpu_for_a_quick_run(harness, record_property):
    script = harness.upload("hello.py", b"print('hi')\n")
    reply = await harness.command("run", script=script, gpu="TPU")
    record_property("observed", seen(reply))
    assert_private_error(reply, "Unknown GPU", "unknown GPU type 'TPU'")


async def test_an_unexpected_error_gives_an_id_and_hides_the_details(
    harness, app, monkeypatch, caplog
):
    async def broken() -> list:
        raise RuntimeError("connection string postgres://secret@db")

    monkeypatch.setattr(app.service.leaderboards, "all", broken)
    with caplog.at_level(logging.ERROR, logger="cluster_manager.discord"):
        reply = await harness.command("leaderboard list")
    message = reply.only
    assert message.ephemeral
    assert "secret" not in message.text()
    error_id = message.content.split("`")[1]
    assert len(error_id) == 8 and int(error_id, 16) >= 0
    (record,) = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.exc_info is not None and "secret@db" in str(record.exc_info[1])


def test_tokens_are_scrubbed_from_logs():
    redactor = RedactingFilter(["bot.token.value"])
    record = logging.LogRecord(
        "discord.http",
        logging.DEBUG,
        __file__,
        1,
        "PATCH https://discord.com/api/v10/webhooks/4242/aW50ZXJhY3Rpb24.tok-en/messages/1 with %s",
        ("Bot bot.token.value",),
        None,
    )
    redactor.filter(record)
    text = record.getMessage()
    assert "bot.token.value" not in text and "aW50ZXJhY3Rpb24" not in text
    assert "/webhooks/4242/[redacted]/messages/1" in text
