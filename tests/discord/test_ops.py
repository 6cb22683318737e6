"""Quick runs and operations: /run, /verifyruns, /verifydb, /ping."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Submitter, health
from tests.discord.conftest import ADMIN, ALICE, BOB, FAST, SOLUTION, create_board
from tests.discord.test_commands import command_payload


async def test_run_shows_the_output_and_attaches_all_of_it(harness):
    script = harness.upload(
        "hello.py", b"import sys\nprint('hi from the GPU')\nprint('x' * 5000)\n"
    )
    reply = await harness.command("run", script=script, gpu="CPU", time_limit=30.0, timeout=120)
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
    reply = await harness.command("run", script=script, gpu="CPU", timeout=120)
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
    # The local runner says what bounds its runs: a cgroup where the machine has one, else
    # rlimits only and why (the fake GPU's runner reports no limits).
    local = "✅ local · **CPU**: passed (sandbox: full; limits: "
    assert lines[1].startswith(local)
    assert lines[1].removeprefix(local).startswith(("cgroup v1: ", "cgroup v2: ", "rlimits only ("))
    assert lines[2] == (
        "🔒 scores of partially sandboxed runs and of runs bounded by rlimits only are held "
        "back (CLUSTER_MANAGER_ALLOW_UNSANDBOXED_RANKING is off)"
    )


async def test_verifydb_times_a_round_trip_and_checks_migrations(harness):
    reply = await harness.command("verifydb", ADMIN)
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
    reply = await harness.command("verifydb", ADMIN)
    record_property("observed", reply.only.content)
    assert "❌ Pending migrations: 0002.something" in reply.only.content


async def test_organisers_commands_are_neither_listed_nor_answered_to_members(harness):
    """/verifydb answered anyone (its errors are the database's own text); /admin, /resync and
    /verifyruns were listed to every member."""
    refused = await harness.command("verifydb")  # a member without the Admin role
    assert refused.only.ephemeral and "SELECT 1" not in refused.only.content
    synced = {c["name"]: c for c in await command_payload()}
    for name in ("admin", "resync", "verifyruns", "verifydb"):
        assert synced[name]["default_member_permissions"] == 32, name  # Manage Server
        assert synced[name]["dm_permission"] is False, name


async def test_ping_answers_with_the_latency(harness):
    reply = await harness.command("ping")
    assert reply.only.ephemeral and reply.acknowledged
    assert reply.only.content.startswith("🏓 Pong! API round trip ")


def _hello(harness):
    return harness.upload("hello.py", b"print('hi')\n")


@pytest.mark.reliability(
    "Access",
    "a user sends /run 3 times within an hour where the limit is 2 script runs per hour",
    "the third is refused privately ('Rate limited', the limit, when to retry) and never runs; "
    "another user may still run, and so may the first an hour later",
)
async def test_run_has_a_per_user_hourly_limit(harness, app, clock, fake_launcher, record_property):
    app.service.scripts.rate_limit_per_hour = 2
    for _ in range(2):
        reply = await harness.command("run", script=_hello(harness), gpu="H100")
        assert reply.only.embeds, reply.only.text()
    refused = await harness.command("run", script=_hello(harness), gpu="H100")
    record_property("observed", " / ".join(m.text() for m in refused.messages))
    message = refused.only
    assert message.ephemeral
    assert "Rate limited" in message.text() and "2 script runs per hour" in message.text()
    assert "try again in 60 min" in message.text()
    assert len(fake_launcher.runs) == 2  # the refused one never reached a launcher

    assert (await harness.command("run", BOB, script=_hello(harness), gpu="H100")).only.embeds
    clock.now += timedelta(hours=1, seconds=1)
    assert (await harness.command("run", script=_hello(harness), gpu="H100")).only.embeds
    assert len(fake_launcher.runs) == 4


async def _wait_for(predicate, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.reliability(
    "Faults",
    "/run on a GPU type allowing one run at a time while a queued submission's job runs there",
    "the script waits for the job to end before it is dispatched: scripts and jobs share the "
    "GPU type's concurrency",
)
async def test_run_waits_for_a_slot_taken_by_a_job(
    harness, app, clock, fake_launcher, record_property
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9  # the job runs until released below
    receipt = await app.service.submissions.submit(
        "identity", Submitter("9", "nine"), "s.py", SOLUTION, mode=Mode.TEST
    )
    scheduler = Scheduler(app.pool, app.registry, {"fake": fake_launcher}, config=FAST)
    serving = asyncio.create_task(scheduler.run_until_idle({j.id for j in receipt.jobs}))
    await _wait_for(lambda: len(fake_launcher.runs) == 1)

    reply, tasks = harness.start("run", script=_hello(harness), gpu="H100")
    try:
        waiting = "⏳ Waiting for a free slot on **H100** for `hello.py`…"
        await _wait_for(lambda: any(waiting in m.history for m in reply.messages), timeout=60)
        await asyncio.sleep(1)  # a poll or two for a slot, which must not take the job's
        dispatched_early = len(fake_launcher.runs) > 1
    finally:
        fake_launcher.polls = 1
        for run in fake_launcher.runs.values():
            run.polls_left = 1  # the job ends; its slot frees
    await asyncio.wait_for(asyncio.gather(serving, *tasks), 30)
    record_property(
        "observed",
        f"script dispatched while the job ran: {dispatched_early}; then "
        f"{reply.only.embeds[0]['title'] if reply.only.embeds else reply.only.text()}",
    )
    assert not dispatched_early
    assert reply.only.history[0] == waiting
    assert len(fake_launcher.runs) == 2
    assert reply.only.embeds[0]["title"].startswith("✅ hello.py on H100: passed")


async def test_queue_shows_the_lines_and_the_members_own_jobs(harness, app, clock):
    await create_board(app, clock)
    await app.service.submissions.submit(
        "identity", Submitter(str(ALICE.id), ALICE.name), "submission.py", SOLUTION, mode=Mode.TEST
    )
    reply = await harness.command("queue", ALICE)
    assert reply.only.ephemeral and "CPU" in reply.only.content
    assert "Your jobs:" in reply.only.content and "#1 in line" in reply.only.content
    other = await harness.command("queue", BOB)
    assert "Your jobs:" not in other.only.content
