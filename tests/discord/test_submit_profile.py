"""`/leaderboard submit` in profile mode with Nsight Compute's filter: the options reach the
run the launcher is given, and a bad one is refused with its name before anything is stored."""

from __future__ import annotations

from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfileOptions
from tests.discord.conftest import SOLUTION, create_board


async def test_the_filter_options_reach_the_run(make_harness, app, clock, fake_launcher):
    await create_board(app, clock, gpus=("H100",))  # the fake launcher's GPU type
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)

    reply = await harness.command(
        "leaderboard submit",
        script=script,
        leaderboard="identity",
        mode="profile",
        ncu_kernel_name="custom_.*",
        ncu_launch_count=3,
        timeout=60,
    )

    assert "Submission #1 accepted" in reply.messages[0].content
    (run,) = fake_launcher.runs.values()
    assert run.request.mode is Mode.PROFILE
    assert run.request.profile == ProfileOptions(kernel_name="custom_.*", launch_count=3)
    stored = await app.pool.fetchval("SELECT profile_options FROM submissions")
    assert stored["kernel_name"] == "custom_.*" and stored["launch_count"] == 3


async def test_without_options_a_profile_gets_the_default_filter(
    make_harness, app, clock, fake_launcher
):
    await create_board(app, clock, gpus=("H100",))
    harness = await make_harness(scheduler=True)
    script = harness.upload("submission.py", SOLUTION)

    await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", mode="profile", timeout=60
    )

    (run,) = fake_launcher.runs.values()
    assert run.request.profile == ProfileOptions()
    assert await app.pool.fetchval("SELECT profile_options FROM submissions") is None


async def test_a_broken_regex_is_refused_by_its_option_name(harness, app, clock):
    await create_board(app, clock)
    script = harness.upload("submission.py", SOLUTION)

    reply = await harness.command(
        "leaderboard submit",
        script=script,
        leaderboard="identity",
        mode="profile",
        ncu_kernel_name="gemm(",
    )

    message = reply.only
    assert message.ephemeral
    assert "`ncu_kernel_name`: kernel name filter: not a regex" in message.content
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0


async def test_a_filter_outside_profile_mode_is_refused(harness, app, clock):
    await create_board(app, clock)
    script = harness.upload("submission.py", SOLUTION)

    reply = await harness.command(
        "leaderboard submit",
        script=script,
        leaderboard="identity",
        mode="test",
        ncu_launch_count=3,
    )

    message = reply.only
    assert message.ephemeral and "for profile mode only, not test mode" in message.content
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0
