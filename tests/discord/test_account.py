"""/token: an API token for the terminal, private, one live per user, revocable, the same
user as on Discord, and never in a log line."""

from __future__ import annotations

import logging
import re

import pytest

from cluster_manager.cli.logs import RedactingFilter
from cluster_manager.service import Submitter, UnauthorizedError
from tests.discord.conftest import ALICE

TOKEN = re.compile(r"```\n(cm_[\w\-]+)\n```")


async def test_token_is_private_and_names_the_discord_user(harness, app):
    reply = await harness.command("token")
    message = reply.only
    assert message.ephemeral
    token = TOKEN.search(message.content).group(1)
    assert f"cli_id: {token}" in message.content and "POPCORN_API_URL" in message.content
    assert await app.service.accounts.authenticate(token) == Submitter(str(ALICE.id), ALICE.name)


async def test_a_new_token_replaces_the_old_and_revoke_turns_it_off(harness, app):
    first = TOKEN.search((await harness.command("token")).only.content).group(1)
    second = TOKEN.search((await harness.command("token")).only.content).group(1)
    with pytest.raises(UnauthorizedError):
        await app.service.accounts.authenticate(first)
    assert await app.service.accounts.authenticate(second)
    revoked = await harness.command("token", revoke=True)
    assert revoked.only.ephemeral and revoked.only.content == "Your API token is revoked."
    with pytest.raises(UnauthorizedError):
        await app.service.accounts.authenticate(second)
    again = await harness.command("token", revoke=True)
    assert again.only.content == "You had no API token."


def test_api_tokens_are_scrubbed_from_log_lines():
    token = "cm_" + "A1b2-C3d4_" * 4
    record = logging.LogRecord(
        "discord.http",
        logging.DEBUG,
        __file__,
        1,
        "PATCH ... with %s",
        (f"{{'content': '{token}'}}",),
        None,
    )
    RedactingFilter([]).filter(record)
    assert token not in record.getMessage() and "cm_[redacted]" in record.getMessage()
