"""A follow that outlives Discord's trouble: server errors and rate limits on the status's
edits and on the report skip an edit or wait, and the report still arrives."""

from __future__ import annotations

import asyncio
import types

import discord
import pytest

from cluster_manager.discord import live
from tests.discord.conftest import create_board


@pytest.fixture
def discord_retries_at_once(monkeypatch):
    """discord.py waits 1, 3, 5, 7 and 9 s between its own tries of a 5xx: not here."""
    real = asyncio

    async def no_wait(delay: float, result=None):
        return await real.sleep(0, result)

    shim = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if k[:2] != "__"})
    shim.sleep = no_wait
    monkeypatch.setattr(discord.webhook.async_, "asyncio", shim)
    monkeypatch.setattr(live, "FIRST_WAIT_S", 0.01)  # ours too


@pytest.mark.reliability(
    "Faults",
    "Discord failing a follow: every try of two status edits answered 500, three 429s, and "
    "the report's first send answered 500 five times over",
    "the follow goes on: the edits are skipped, the report is sent again and arrives, and "
    "the status ends 'Done'",
)
@pytest.mark.usefixtures("discord_retries_at_once")
async def test_a_follow_survives_server_errors_and_rate_limits(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9
    harness = await make_harness(scheduler=True)
    reply, tasks = await harness.submit_held(fake_launcher)
    edits = r"/webhooks/\d+/[^/]+/messages/\d+$"
    harness.fake.fail("PATCH", edits, 500, 10)  # two edits, each tried five times
    harness.fake.fail("PATCH", edits, 429, 3)
    harness.fake.fail("POST", r"/webhooks/\d+/[^/]+$", 500, 5)  # the report's first send
    for run in fake_launcher.runs.values():
        run.polls_left = 1
    await harness._finish(tasks, 60)

    _, status, report = reply.messages
    assert report.ephemeral and report.embeds[0]["title"] == "✅ Submission #1: passed"
    assert "🏁 Done in" in status.content
    assert len(harness.fake.calls("POST", r"/webhooks/\d+/[^/]+$")) >= 7  # status, 5 + 1 report


async def test_a_quiet_status_still_shows_the_time_it_has_taken(
    make_harness, app, clock, fake_launcher, monkeypatch
):
    """The elapsed time moved only with job events: a long queue or run looked frozen."""
    monkeypatch.setattr(live, "TICK_S", 0.1)
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9  # the run says nothing more until released
    harness = await make_harness(scheduler=True)
    reply, tasks = await harness.submit_held(fake_launcher)
    status = reply.messages[1]
    await harness.fake.wait_for(lambda: "⏱️ 2 s so far" in status.content, timeout=10)
    for run in fake_launcher.runs.values():
        run.polls_left = 1
    await harness._finish(tasks, 30)
    assert "🏁 Done in" in status.content
