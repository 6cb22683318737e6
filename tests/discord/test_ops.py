"""Quick runs and operations: /run, /verifyruns, /verifydb, /ping."""

from __future__ import annotations

import pytest

from cluster_manager.discord import health
from tests.discord.conftest import ADMIN


async def test_run_shows_the_output_and_attaches_all_of_it(harness):
    script = harness.upload(
        "hello.py", b"import sys\nprint('hi from the GPU')\nprint('x' * 5000)\n"
    )
    reply = await harness.command("run", script=script, gpu="CPU", time_limit=30.0)
    message = reply.only
    assert message.ephemeral
    assert message.history[0] == "⚙️ Running `hello.py` on **CPU**…"
    (embed,) = message.embeds
    assert embed["title"].startswith("✅ hello.py on CPU: passed in ")
    stdout = next(f["value"] for f in embed["fields"] if f["name"] == "stdout")
    assert len(stdout) <= 1024 and stdout.startswith("```\n…")  # the end is kept
    output = message.files["hello.py.output.txt"].decode()
    assert "hi from the GPU" in output and "x" * 5000 in output


async def test_run_shows_the_error_of_a_failing_script(harness):
    script = harness.upload("boom.py", b"raise SystemExit('it broke')\n")
    reply = await harness.command("run", script=script, gpu="CPU")
    (embed,) = reply.only.embeds
    assert embed["title"].startswith("❌ boom.py on CPU:")
    stderr = next(f["value"] for f in embed["fields"] if f["name"] == "stderr")
    assert "it broke" in stderr


async def test_verifyruns_runs_the_example_on_every_served_gpu(harness):
    reply = await harness.command("verifyruns", ADMIN, timeout=120)
    lines = reply.only.content.splitlines()
    assert reply.only.ephemeral
    assert len(lines) == 3
    assert lines[0].startswith("✅ fake · **H100**: passed (sandbox: full) in ")
    assert lines[1].startswith("✅ local · **CPU**: passed (sandbox: full) in ")
    assert lines[2] == (
        "🔒 scores of partially sandboxed runs are held back "
        "(CLUSTER_MANAGER_ALLOW_UNSANDBOXED_RANKING is off)"
    )


async def test_verifydb_times_a_round_trip_and_checks_migrations(harness):
    reply = await harness.command("verifydb")
    text = reply.only.content
    assert reply.only.ephemeral
    assert "✅ The database answered `SELECT 1` in " in text
    assert "✅ The schema is up to date: no pending migrations." in text


@pytest.mark.reliability(
    "Faults",
    "the database schema is behind the code (a migration is pending)",
    "/verifydb names the pending migration and how to apply it",
)
async def test_verifydb_reports_pending_migrations(harness, monkeypatch, record_property):
    monkeypatch.setattr(health, "pending_migrations", lambda url: ["0002.something"])
    reply = await harness.command("verifydb")
    record_property("observed", reply.only.content)
    assert "❌ Pending migrations: 0002.something" in reply.only.content


async def test_ping_answers_with_the_latency(harness):
    reply = await harness.command("ping")
    assert reply.only.ephemeral and reply.acknowledged
    assert reply.only.content.startswith("🏓 Pong! API round trip ")
