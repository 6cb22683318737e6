"""`/leaderboard submit` end to end: the bot's scheduler runs the jobs, the status is edited
live from the service's events, and the report comes back as an embed with the log."""

from __future__ import annotations

import asyncio

import pytest

from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.records import JobState
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from cluster_manager.core.run_results import TestOutcome as CaseOutcome
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Submitter
from cluster_manager.storage import jobs as job_store
from tests.discord.conftest import ALICE, SOLUTION, create_board


def status_and_report(reply):
    """The acknowledgement, the status message and the report: all the submitter's own."""
    ack, status, report = reply.messages
    assert ack.ephemeral and status.ephemeral and report.ephemeral
    return ack, status, report


# Discord's one end-to-end run on the real local launcher (runner, sandbox, harness).
@pytest.mark.real_runs
async def test_ranked_submission_through_the_local_launcher(make_harness, app, clock):
    await create_board(app, clock)
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)

    reply = await harness.command(
        "leaderboard submit",
        script=script,
        leaderboard="identity",
        mode="leaderboard",
        timeout=150,
    )

    ack, status, report = status_and_report(reply)
    assert "Submission #1 accepted" in ack.content
    # The channel sees what the competition publishes: whose ranked submission, its place.
    (public,) = harness.fake.channel_messages()
    assert public.content.startswith("✅ **Alice**'s ranked submission #1 to **identity** passed")
    assert "CPU rank #1 with" in public.content and "Tests" not in public.content
    # Edited live, in order: queued… → running… → done.
    history = status.history
    assert status.edits >= 3, history
    assert "queued" in history[0]
    first_running = next(i for i, h in enumerate(history) if "running tests" in h)
    assert any("running the ranked benchmarks" in h for h in history[first_running:])
    assert "🏁 Done in" in history[-1] and "✅ **CPU**: passed" in history[-1]
    assert "✅ **CPU** secret re-run: passed" in history[-1]
    assert f"<@{ALICE.id}>" in history[0]

    (embed,) = report.embeds
    assert embed["title"] == "✅ Submission #1: passed"
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert "✅ size: 127; seed: 4242" in fields["✅ CPU: passed"]  # the task's own key order
    assert "🏁 Score:" in fields["✅ CPU: passed"]
    assert fields["Secret re-runs"] == "✅ CPU: passed"
    assert "rank #1" in fields["Ranking"] and "new personal best" in fields["Ranking"]
    log = report.files["submission-1.txt"].decode()
    assert "Tests (test phase)" in log and "Benchmarks (leaderboard phase)" in log
    assert "[CPU secret] ✅ secret re-run: passed" in log  # the secret run: its verdict only
    assert (await app.service.leaderboards.ranking("identity"))["CPU"][0].user == str(ALICE.id)


async def test_a_menu_asks_for_the_gpu_when_the_leaderboard_has_several(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("CPU", "H100"))
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)
    reply, tasks = harness.start(
        "leaderboard submit", script=script, leaderboard="identity", mode="test"
    )
    (menu,) = await harness.fake.wait_for(lambda: [m for m in reply.messages if m.components])
    assert menu.ephemeral and "runs on several GPUs" in menu.content
    select = menu.components[0]["components"][0]
    assert [o["value"] for o in select["options"]] == ["CPU", "H100"]
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0  # nothing yet

    await harness.click(menu, "Choose one or more GPUs", values=["H100"])
    await harness._finish(tasks, 30)

    ack, status, report = status_and_report(reply)
    assert ack is menu and "Submission #1 accepted" in ack.content and not ack.components
    assert "✅ **H100**: passed" in status.content and "test" in status.content
    assert report.embeds[0]["title"] == "✅ Submission #1: passed"
    assert "Ranking" not in {f["name"] for f in report.embeds[0]["fields"]}
    jobs = await job_store.jobs_of_submission(app.pool, 1)
    assert [(j.gpu, j.mode) for j in jobs] == [("H100", Mode.TEST)]
    assert len(fake_launcher.runs) == 1


@pytest.mark.reliability(
    "Bad input",
    "/leaderboard submit on a multi-GPU leaderboard, then no answer to the GPU menu",
    "'No choice in time: nothing was done.'; the menu is removed; no submission stored",
)
async def test_an_unanswered_gpu_menu_submits_nothing(make_harness, app, clock, record_property):
    await create_board(app, clock, gpus=("CPU", "H100"))
    harness = await make_harness(view_timeout=0.3)
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    record_property("observed", " / ".join(m.content for m in reply.messages))
    message = reply.only
    assert message.ephemeral and "No choice in time: nothing was done." in message.content
    assert message.components == []
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0


async def test_the_file_header_names_the_leaderboard_and_gpu(make_harness, app, clock):
    await create_board(app, clock, gpus=("CPU", "H100"))
    harness = await make_harness(scheduler=True)
    code = b"#!POPCORN leaderboard identity\n#!POPCORN gpu H100\n" + SOLUTION
    script = harness.upload("submission.py", code)
    reply = await harness.command("leaderboard submit", script=script, mode="benchmark")
    ack, status, _ = status_and_report(reply)
    assert "accepted" in ack.content
    assert "→ **identity** · benchmark" in status.content
    assert "✅ **H100**: passed" in status.content


async def test_without_a_mode_a_file_is_only_tested(make_harness, app, clock, fake_launcher):
    """Trying a file must not rank it: a ranked run spends the quota and a secret re-run, so
    it is made only when `mode: ranked` is chosen."""
    await create_board(app, clock, gpus=("H100",))
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    _, status, report = status_and_report(reply)
    assert "→ **identity** · test" in status.content
    jobs = await job_store.jobs_of_submission(app.pool, 1)
    assert [(j.gpu, j.mode, j.secret) for j in jobs] == [("H100", Mode.TEST, False)]
    assert "Ranking" not in {f["name"] for f in report.embeds[0]["fields"]}
    assert harness.fake.channel_messages() == []  # the channel sees ranked runs only


def crashed(request: RunRequest) -> RunResult:
    """A run whose test raised: the runner ran the file as `submission.py`, and says so."""
    where = "(submission.py, line 2)"
    trace = 'Traceback:\n  File "submission.py", line 2, in custom_kernel\nValueError: boom'
    test = CaseOutcome(0, "size: 8", False, error=f"ValueError: boom {where}")
    phase = PhaseOutcome(
        "test", 1, False, 0.1, "", trace, Verdict.RUNTIME_ERROR, "test 0 failed", tests=(test,)
    )
    message = f"test: test 0 failed: ValueError: boom {where}"
    return RunResult(False, Verdict.RUNTIME_ERROR, request.mode, message, phases=(phase,))


async def test_the_report_and_its_log_name_the_authors_own_file(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.outcome = crashed
    harness = await make_harness(scheduler=True)
    script = harness.upload("crash.py", SOLUTION)
    reply = await harness.command("leaderboard submit", script=script, leaderboard="identity")
    _, _, report = status_and_report(reply)
    (field,) = report.embeds[0]["fields"]
    assert "ValueError: boom (crash.py, line 2)" in field["value"]
    log = report.files["submission-1.txt"].decode()
    assert 'File "crash.py", line 2, in custom_kernel' in log  # the phase's own stderr too
    assert "submission.py" not in field["value"] + log


async def test_many_follows_at_once_each_show_their_place_in_line(
    make_harness, app, clock, fake_launcher
):
    """Past four follows a status used to poll, with neither place in line nor phase: every
    follow now shares the one database listener and keeps its detail."""
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9
    harness = await make_harness(scheduler=True)  # H100: one job at a time (max_concurrent)
    started = [
        harness.start(
            "leaderboard submit",
            script=harness.upload(f"s{i}.py", SOLUTION),
            leaderboard="identity",
            mode="test",
        )
        for i in range(6)
    ]
    replies = [reply for reply, _ in started]
    await harness.fake.wait_for(lambda: all(len(r.messages) == 2 for r in replies))
    await harness.fake.wait_for(
        lambda: sum("queued, position" in r.messages[1].content for r in replies) >= 4
    )
    fake_launcher.polls = 1
    for run in fake_launcher.runs.values():
        run.polls_left = 1
    for _, tasks in started:
        await harness._finish(tasks, 60)
    assert all("🏁 Done in" in r.messages[1].content for r in replies)


async def test_the_status_moves_to_a_direct_message_when_the_token_expires(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.polls = 10**9  # runs stay running until released below
    harness = await make_harness(scheduler=True)
    code = b"#!POPCORN leaderboard identity\n" + SOLUTION
    reply, tasks = harness.start(
        "leaderboard submit", script=harness.upload("s.py", code), mode="test"
    )
    await harness.fake.wait_for(lambda: fake_launcher.runs and len(reply.messages) == 2)

    harness.fake.expire(reply.token)  # 15 minutes later…
    for run in fake_launcher.runs.values():
        run.polls_left = 1
    await harness._finish(tasks, 30)

    # The rest of it goes on privately, in a direct message; the channel sees nothing.
    assert harness.fake.channel_messages() == []
    status, report = harness.fake.direct_messages(ALICE.id)
    assert "✅ **H100**: passed" in status.content and "🏁 Done in" in status.content
    assert report.embeds[0]["title"].startswith("✅ Submission #")
    assert "submission-" in next(iter(report.files))
    jobs = await job_store.jobs_of_submission(app.pool, 1)
    assert all(j.state is JobState.FINISHED for j in jobs)


async def test_the_bots_scheduler_resumes_jobs_left_in_flight(
    make_harness, app, clock, fake_launcher
):
    """A previous bot process dispatched a job and died: this one adopts it once the lease
    expires, re-attaches to the run and records its result once."""
    await create_board(app, clock, gpus=("H100",))
    receipt = await app.service.submissions.submit(
        "identity", Submitter("9", "nine"), "s.py", SOLUTION, mode=Mode.TEST
    )
    fake_launcher.polls = 10**9
    config = SchedulerConfig(lease_s=30, heartbeat_s=10, poll_s=0.05)
    dead = Scheduler(app.pool, app.registry, {"fake": fake_launcher}, config=config, owner="dead")
    await dead.step()
    for _ in range(600):  # the dispatch runs in a task of its own
        (job,) = await job_store.jobs_of_submission(app.pool, receipt.submission_id)
        if job.state is JobState.DISPATCHED:
            break
        await asyncio.sleep(0.05)
    for task in list(dead._tasks.values()):
        task.cancel()
    assert job.state is JobState.DISPATCHED and job.lease_owner == "dead"
    for run in fake_launcher.runs.values():
        run.polls_left = 1
    await app.pool.execute("UPDATE jobs SET lease_expires_at = now() - interval '1 second'")

    await make_harness(scheduler=True)
    for _ in range(1200):
        (job,) = await job_store.jobs_of_submission(app.pool, receipt.submission_id)
        if job.state is JobState.FINISHED:
            break
        await asyncio.sleep(0.05)
    assert job.state is JobState.FINISHED and job.lease_owner != "dead"
    assert sum(fake_launcher.submits.values()) == 1  # re-attached, not dispatched again
