"""Reading leaderboards: autocomplete, list, rankings with pages, own runs, task, template."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import timedelta

import pytest

from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Submitter
from tests.conftest import CORRECT
from tests.discord.conftest import ALICE, BOB, FAST, IDENTITY, Member, create_board
from tests.discord.test_errors import SOLUTION, assert_private_error, stored
from tests.support.fakes import SANDBOXED


async def test_autocomplete_suggests_leaderboards_by_prefix(harness, app, clock):
    for name in ("identity", "idle", "softmax"):
        await create_board(app, clock, name)
    assert await harness.autocomplete("leaderboard show", "name", name="id") == [
        "identity",
        "idle",
    ]
    assert await harness.autocomplete("leaderboard show", "name", name="ID") == [
        "identity",
        "idle",
    ]
    assert await harness.autocomplete("leaderboard delete", "name", name="") == [
        "identity",
        "idle",
        "softmax",
    ]
    assert await harness.autocomplete("leaderboard submit", "leaderboard", leaderboard="s") == [
        "softmax"
    ]


async def test_autocomplete_finds_any_part_of_a_name_and_offers_no_board_refusing_late_runs(
    harness, app, clock
):
    for name in ("grayscale", "matmul", "amd-gemm", "old-gemm"):
        await create_board(app, clock, name)
    await app.pool.execute(  # old-gemm has ended
        "UPDATE leaderboards SET deadline = $1 WHERE name = 'old-gemm'",
        clock.now - timedelta(hours=1),
    )
    await app.service.controls.set_after_deadline_runs("old-gemm", False, "org")
    shown = await harness.autocomplete("leaderboard show", "name", name="gemm")
    assert shown == ["amd-gemm", "old-gemm"]  # open first
    assert await harness.autocomplete("leaderboard show", "name", name="a") == [
        "amd-gemm",  # starts with it
        "grayscale",
        "matmul",
    ]
    offered = await harness.autocomplete("leaderboard submit", "leaderboard", leaderboard="gemm")
    assert offered == ["amd-gemm"]


async def test_autocomplete_suggests_gpus(harness, app, clock):
    await create_board(app, clock, gpus=("CPU", "H100"))
    found = await harness.autocomplete("leaderboard submit", "gpu", leaderboard="identity", gpu="")
    assert found == ["CPU", "H100"]
    assert await harness.autocomplete("leaderboard show", "gpu", name="identity", gpu="h") == [
        "H100"
    ]
    # Not a leaderboard (yet): no suggestions rather than an error.
    assert await harness.autocomplete("leaderboard submit", "gpu", leaderboard="x", gpu="") == []
    assert await harness.autocomplete("run", "gpu", gpu="") == ["CPU", "H100"]


async def test_list_shows_gpus_deadline_and_time_left(harness, app, clock):
    await create_board(app, clock, "identity", gpus=("CPU", "H100"))
    reply = await harness.command("leaderboard list")
    message = reply.only
    assert not message.ephemeral
    (embed,) = message.embeds
    assert "**identity** · CPU, H100 · ends <t:" in embed["description"]
    assert "(3 days left) · 0 submissions" in embed["description"]


async def test_list_says_ended_after_the_deadline(harness, app, clock):
    await create_board(app, clock, "identity")
    clock.now += timedelta(days=4)
    (embed,) = (await harness.command("leaderboard list")).only.embeds
    assert "**identity** · CPU · ended <t:" in embed["description"]
    assert "closed" not in embed["description"]


async def test_list_without_leaderboards(harness):
    reply = await harness.command("leaderboard list")
    assert "No leaderboards yet." in reply.only.text()


def _scored(request: RunRequest) -> RunResult:
    """Each user's code names its score: `# score N`."""
    score = int(re.search(r"# score (\d+)", request.submission_code)[1]) / 1e6
    ranked = request.mode is Mode.LEADERBOARD
    score = score if ranked else None
    return RunResult(True, Verdict.PASSED, request.mode, "ok", score=score, system=SANDBOXED)


async def rank_users(app, fake_launcher, count: int) -> None:
    fake_launcher.outcome = _scored
    job_ids = set()
    for i in range(count):
        user = Submitter(str(2000 + i), f"user{i}")
        code = f"{CORRECT}# score {i + 1}\n"
        receipt = await app.service.submissions.submit(
            "identity", user, "s.py", code.encode(), mode=Mode.LEADERBOARD
        )
        job_ids |= {j.id for j in receipt.jobs}
    scheduler = Scheduler(app.pool, app.registry, {"fake": fake_launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle(job_ids), 120)


async def test_show_pages_through_a_long_ranking(harness, app, clock, fake_launcher):
    await create_board(app, clock, gpus=("H100",))
    await rank_users(app, fake_launcher, 12)

    reply = await harness.command("leaderboard show", name="identity")
    message = reply.only
    assert not message.ephemeral
    page = message.embeds[0]
    assert page["title"] == "🏆 identity on H100"
    lines = page["description"].splitlines()
    assert len(lines) == 10
    # By stored name: a mention of someone a member's client has not loaded shows a raw id.
    assert lines[0].startswith("`#1` user0 · **1 µs**")
    assert page["footer"]["text"] == "Page 1/2"
    buttons = {b["label"]: b for row in message.components for b in row["components"]}
    assert buttons["Previous"].get("disabled") and not buttons["Next"].get("disabled")

    # The chart of the best score over time comes with it, shown on the first page.
    assert page["image"]["url"] == "attachment://ranking.png"
    assert message.files["ranking.png"].startswith(b"\x89PNG\r\n\x1a\n")

    # Another member's press: their own private copy of the page; this message stays.
    other = await harness.click(message, "Next", BOB)
    assert other.only.ephemeral and other.only.embeds[0]["footer"]["text"] == "Page 2/2"
    assert message.embeds[0]["footer"]["text"] == "Page 1/2"

    await harness.click(message, "Next")
    page = message.embeds[0]
    assert page["footer"]["text"] == "Page 2/2"
    assert [line.split(" ")[0] for line in page["description"].splitlines()] == [
        "`#11`",
        "`#12`",
    ]
    assert not message.files and not message.attachments  # the chart is page 1's
    await harness.click(message, "Previous")
    assert message.embeds[0]["footer"]["text"] == "Page 1/2"
    assert message.files["ranking.png"].startswith(b"\x89PNG")


async def test_show_an_empty_ranking_for_one_gpu(harness, app, clock):
    await create_board(app, clock, gpus=("CPU", "H100"))
    reply = await harness.command("leaderboard show", name="identity", gpu="CPU")
    (embed,) = reply.only.embeds
    assert embed["title"] == "🏆 identity on CPU"
    assert embed["description"] == "No ranked submissions yet."
    assert "image" not in embed and not reply.only.files  # no chart of nothing


async def test_show_personal_lists_only_the_callers_runs(harness, app, clock, fake_launcher):
    await create_board(app, clock, gpus=("H100",))
    await rank_users(app, fake_launcher, 2)
    me = await harness.command("leaderboard show-personal", name="identity")
    assert me.only.ephemeral
    assert "You have no runs on identity yet." in me.only.text()

    mine = await harness.command(
        "leaderboard show-personal", Member(2000, "user0"), name="identity"
    )
    text = mine.only.text()
    assert "Your runs on identity" in text
    assert "H100 · ranked · ✅ passed · 1 µs" in text
    assert "H100 (secret) · ranked · ✅ passed" in text
    assert text.count("\n#") == 2  # the public and the secret run of one submission


def _secret_scored_apart(request: RunRequest) -> RunResult:
    """The secret re-run scores 7 µs, the public run 1 µs."""
    result = _scored(dataclasses.replace(request, submission_code="# score 1"))
    if request.secret_seed is None:
        return result
    return dataclasses.replace(result, score=7e-6, message="seed-derived detail")


@pytest.mark.reliability(
    "Access",
    "/leaderboard show-personal after a ranked submission whose secret re-run scored 7 µs and "
    "its public run 1 µs",
    "the secret run's line shows its verdict only; 1 µs, the public score, is all that is shown",
)
async def test_show_personal_shows_no_score_of_a_secret_run(
    harness, app, clock, fake_launcher, record_property
):
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.outcome = _secret_scored_apart
    receipt = await app.service.submissions.submit(
        "identity", Submitter("2000", "user0"), "s.py", CORRECT.encode(), mode=Mode.LEADERBOARD
    )
    scheduler = Scheduler(app.pool, app.registry, {"fake": fake_launcher}, config=FAST)
    await asyncio.wait_for(scheduler.run_until_idle({j.id for j in receipt.jobs}), 30)

    reply = await harness.command(
        "leaderboard show-personal", Member(2000, "user0"), name="identity"
    )
    text = reply.only.text()
    record_property("observed", text.replace("\n", " / "))
    assert "H100 · ranked · ✅ passed · 1 µs" in text
    (secret_line,) = [line for line in text.splitlines() if "(secret)" in line]
    assert "ranked · ✅ passed · <t:" in secret_line  # the verdict, then straight to the time
    assert "7 µs" not in text and "seed-derived" not in text


async def test_task_files_come_as_attachments(harness, app, clock):
    await create_board(app, clock)
    reply = await harness.command("leaderboard task", name="identity")
    message = reply.only
    assert message.ephemeral
    assert sorted(message.files) == [
        "reference.py",
        "task.py",
        "task.yml",
        "template.py",
        "utils.py",
    ]
    assert message.files["reference.py"] == (IDENTITY / "reference.py").read_bytes()
    assert "Identity: return a new 1-D float32 tensor" in message.content


async def test_template_is_a_file_that_names_its_leaderboard(harness, app, clock):
    await create_board(app, clock)
    reply = await harness.command("leaderboard template", name="identity", language="Python")
    message = reply.only
    assert message.ephemeral
    code = message.files["identity_template.py"].decode()
    assert code.startswith("#!POPCORN leaderboard identity\n")
    assert code.endswith((IDENTITY / "template.py").read_text())

    missing = await harness.command("leaderboard template", name="identity", language="CUDA")
    assert "no CUDA template (it has: Python)" in missing.only.content
    assert missing.only.ephemeral


@pytest.mark.reliability(
    "Access",
    "an invite-only leaderboard read and submitted to in Discord by a member who has not "
    "joined it: /leaderboard show, task, template, show-personal, submit, GPU autocomplete",
    "each answers privately as for a leaderboard that does not exist; a member reads its "
    "ranking privately, not in the channel",
)
async def test_an_invite_only_board_is_missing_to_those_who_have_not_joined(harness, app, clock):
    await create_board(app, clock)
    await app.service.invites.set_closed("identity", True)
    script = harness.upload("submission.py", SOLUTION)
    for path, options in [
        ("leaderboard show", {"name": "identity"}),
        ("leaderboard task", {"name": "identity"}),
        ("leaderboard template", {"name": "identity"}),
        ("leaderboard show-personal", {"name": "identity"}),
        ("leaderboard submit", {"script": script, "leaderboard": "identity"}),
    ]:
        reply = await harness.command(path, BOB, **options)
        assert_private_error(reply, "there is no leaderboard named 'identity'")
    assert await stored(app, "submissions") == 0
    assert (
        await harness.autocomplete("leaderboard submit", "gpu", BOB, leaderboard="identity") == []
    )
    (code,) = await app.service.invites.mint("identity", 1, 1, "test")
    await app.service.invites.join(code, Submitter(str(ALICE.id), ALICE.name))
    shown = await harness.command("leaderboard show", ALICE, name="identity")
    assert shown.only.ephemeral and "identity" in shown.only.text()
