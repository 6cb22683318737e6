"""Every command's longest answer, within Discord's limits: each command that answers with a
list or long text meets the most data it can (200 leaderboards, 100 ranked users with long
unicode names, 100 jobs, 100 KB of output, 6,000-character options: Discord's most). The fake
Discord refuses any message over Discord's limits, as Discord does (and the fixtures fail the
test then); each case also finds the whole of its content: paged, or attached as a file.

The admin commands' cases are in `test_limits_admin.py`; `BOUNDED` names the commands whose
answers cannot grow, and a test holds that every command of the tree is in one or the other.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import discord
import pytest
import yaml

from cluster_manager.core.models import Mode, RunRequest, TaskFile, Verdict
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from cluster_manager.core.run_results import TestOutcome as CaseOutcome
from cluster_manager.core.submission import MAX_SUBMISSION_BYTES
from cluster_manager.core.task import load_task
from cluster_manager.discord.replies import MESSAGE_CHARS
from cluster_manager.service import Submitter
from cluster_manager.service.health import DatabaseCheck
from tests.discord.conftest import ADMIN, ALICE, IDENTITY, SOLUTION, create_board
from tests.discord.test_commands import command_payload, walk
from tests.discord.test_errors import assert_private_error
from tests.storage.helpers import finish_submission
from tests.support.fakes import passing

# Discord takes up to 6,000 characters in a string option.
LONGEST_OPTION = 6000
BIG_OUTPUT = "".join(f"line {i:05d} of the output: {'x' * 80}\n" for i in range(1100))  # 100 KB
# A long display name: unicode, markdown Discord would read, and right-to-left text.
LONG_NAME = "ユーザー_*ʕ•ᴥ•ʔ*_~~𝔘𝔫𝔦𝔠𝔬𝔡𝔢~~ שלום `tick` " * 3

# Commands whose answers cannot outgrow a message, and why.
BOUNDED = {
    "ping": "one line of two latencies",
    "token": "a fixed text around one token and the API's URL",
    "resync": "one line with a count",
    "leaderboard create": "a GPU menu of at most 25 and one line naming them",
    "leaderboard delete": "a confirmation naming one stored leaderboard",
    "leaderboard template": "one line, and the starter as a file",
    "admin resume": "one line naming a stored leaderboard",
    "admin unban": "one line with a mention",
    "admin restore": "one line with a number",
    "admin rerun": "one line with a count",
    "admin close": "one line naming the leaderboard (an unknown one is an error, below)",
    "admin open": "one line naming the leaderboard",
    "admin channel-policy": "two lines naming a stored leaderboard",
    "admin after-deadline": "one line naming a stored leaderboard",
    "admin teams": "one line naming a stored leaderboard and two numbers",
    "team create": "one line naming a stored leaderboard and a team name of 40 characters",
    "team invite": "a fixed text around one code, twice",
    "team join": "one line naming a stored team (an unknown code is an error, below)",
    "team leave": "one line naming a stored team and leaderboard",
}


def whole(message: Any, name: str) -> str:
    """The text of an answer too long for one message: its start, and all of it attached."""
    assert len(message.content) <= MESSAGE_CHARS
    assert f"the whole is attached ({name})" in message.content
    return message.files[name].decode()


async def all_pages(harness: Any, reply: Any, member: Any) -> list[dict[str, Any]]:
    """Every page of a paged answer, turned with its Next button."""
    message = reply.only
    footer = message.embeds[0].get("footer", {}).get("text", "Page 1/1")
    count = int(footer.rpartition("/")[2])
    found = [message.embeds[0]]
    for _ in range(count - 1):
        await harness.click(message, "Next", member)
        found.append(message.embeds[0])
    assert found[-1]["footer"]["text"] == f"Page {count}/{count}"
    return found


async def many_boards(app: Any, clock: Any, count: int) -> list[str]:
    """`count` leaderboards with names of the longest kind (64 characters)."""
    task = load_task(IDENTITY)
    names = [f"{i:03d}-" + "k" * 60 for i in range(count)]
    for name in names:
        await app.service.leaderboards.create(
            name, task, clock.now + timedelta(days=3), ["CPU", "H100"]
        )
    return names


async def raise_quota(app: Any, member: Any) -> None:
    user = Submitter(str(member.id), member.name)
    await app.service.controls.set_quota(user, per_hour=10_000, daily=10_000, actor="test")


# --- the cases: each sets up the most data, runs the command and finds all of it -------------


async def leaderboard_list(harness, app, clock, **_) -> str:
    names = await many_boards(app, clock, 200)
    pages = await all_pages(harness, await harness.command("leaderboard list"), ALICE)
    text = "\n".join(p["description"] for p in pages)
    assert len(pages) == 20 and all(f"**{n}**" in text for n in names)
    suggested = await harness.autocomplete("leaderboard show", "name", name="")
    assert len(suggested) == 25 and set(suggested) <= set(names)
    return f"200 leaderboards in {len(pages)} pages"


async def leaderboard_show(harness, app, clock, **_) -> str:
    await create_board(app, clock, gpus=("CPU", "H100"))
    users = [Submitter(f"cli-user-{i}", f"{i:03d} {LONG_NAME}") for i in range(100)]
    for i, user in enumerate(users):
        receipt = await app.service.submissions.submit(
            "identity", user, "s.py", SOLUTION, gpus=["CPU", "H100"], mode=Mode.LEADERBOARD
        )
        await finish_submission(app.pool, receipt, 1e-3 * (i + 1))
    reply = await harness.command("leaderboard show", name="identity")
    assert "ranking.png" in reply.only.files
    pages = await all_pages(harness, reply, ALICE)
    assert len(pages) == 20
    for gpu in ("CPU", "H100"):
        text = "\n".join(p["description"] for p in pages if p["title"].endswith(f"on {gpu}"))
        assert all(discord.utils.escape_markdown(u.name) in text for u in users), gpu
    return f"100 users on 2 GPUs in {len(pages)} pages, with the chart"


async def leaderboard_show_personal(harness, app, clock, **_) -> str:
    await create_board(app, clock)
    await raise_quota(app, ALICE)
    alice = Submitter(str(ALICE.id), ALICE.name)
    for _ in range(250):
        receipt = await app.service.submissions.submit(
            "identity", alice, "x" * 100 + ".py", SOLUTION, mode=Mode.TEST
        )
        await finish_submission(app.pool, receipt, None)
    pages = await all_pages(
        harness, await harness.command("leaderboard show-personal", name="identity"), ALICE
    )
    text = "\n".join(p["description"] for p in pages)
    assert len(pages) == 25 and all(f"#{i} `" in text for i in range(1, 251))
    return f"250 runs in {len(pages)} pages"


def _huge_outcome(request: RunRequest) -> RunResult:
    """A run that says all it can: 300 failing tests with long errors, 100 KB of output on
    each stream, a long message."""
    tests = tuple(
        CaseOutcome(i, f"size: {i}; seed: {i * 7}", False, f"mismatch at {i}: " + "e" * 500)
        for i in range(300)
    )
    phase = PhaseOutcome(
        request.mode.value,
        1,
        False,
        12.5,
        BIG_OUTPUT,
        BIG_OUTPUT,
        Verdict.WRONG_ANSWER,
        "m" * 20_000,
        tests=tests,
    )
    return RunResult(False, Verdict.WRONG_ANSWER, request.mode, "m" * 20_000, phases=(phase,))


async def _submit_huge(harness, app, clock, fake_launcher) -> Any:
    await create_board(app, clock, gpus=("H100",))
    fake_launcher.outcome = _huge_outcome
    code = SOLUTION + b"#" * (MAX_SUBMISSION_BYTES - len(SOLUTION) - 1) + b"\n"
    script = harness.upload("s" * 150 + ".py", code)
    return await harness.command(
        "leaderboard submit", script=script, leaderboard="identity", mode="test"
    )


async def leaderboard_submit(harness, app, clock, fake_launcher, **_) -> str:
    reply = await _submit_huge(harness, app, clock, fake_launcher)
    _, status, report = reply.messages
    assert "🏁 Done in" in status.content
    (embed,) = report.embeds
    assert embed["title"] == "❌ Submission #1: wrong_answer"
    log = report.files["submission-1.txt"].decode()
    assert BIG_OUTPUT in log and "mismatch at 299: " in log
    return (
        f"a report embed of {len(discord.Embed.from_dict(embed))} characters, a log of {len(log)}"
    )


async def leaderboard_get_submission(harness, app, clock, fake_launcher, **_) -> str:
    await _submit_huge(harness, app, clock, fake_launcher)
    fetched = (await harness.command("leaderboard get-submission", submission_id=1)).only
    assert fetched.embeds[0]["title"] == "❌ Submission #1: wrong_answer"
    assert BIG_OUTPUT in fetched.files["submission-1.txt"].decode()
    assert len(fetched.files["s" * 150 + ".py"]) == MAX_SUBMISSION_BYTES
    return f"the embed, the log and {MAX_SUBMISSION_BYTES} bytes of code"


async def leaderboard_task(harness, app, clock, **_) -> str:
    task = load_task(IDENTITY)
    extra = tuple(TaskFile(f"input_{i:02d}.txt", "data " * 2000) for i in range(25))
    long = dataclasses.replace(task, description="A long story. " * 2000, files=task.files + extra)
    await app.service.leaderboards.create("identity", long, clock.now + timedelta(days=3), ["CPU"])
    messages = (await harness.command("leaderboard task", name="identity")).messages
    assert messages[0].content.startswith("📁 Task files of **identity**\n>>> A long story.")
    assert messages[0].content.endswith("(the whole description is in task.yml)")
    files = {n: d for m in messages for n, d in m.files.items()}
    assert {f.name for f in extra} <= set(files) and "task.yml" in files
    assert yaml.safe_load(files["task.yml"])["description"] == long.description
    return f"{len(files)} files in {len(messages)} messages"


async def run(harness, app, clock, fake_launcher, **_) -> str:
    def outcome(request: RunRequest) -> RunResult:
        if request.mode.value != "script":
            return passing(request)
        phase = PhaseOutcome(
            "script", 1, False, 3.0, BIG_OUTPUT, BIG_OUTPUT, Verdict.RUNTIME_ERROR, ""
        )
        return RunResult(False, Verdict.RUNTIME_ERROR, request.mode, "t" * 10_000, phases=(phase,))

    fake_launcher.outcome = outcome
    name = "r" * 246 + ".py"  # a file system's longest name (255 bytes) or so
    reply = await harness.command("run", script=harness.upload(name, b"print(1)\n"), gpu="H100")
    (embed,) = reply.only.embeds
    assert embed["title"].startswith("❌ rrrr") and embed["title"].endswith("in 3.0 s")
    output = reply.only.files[f"{name}.output.txt"].decode()
    assert output.count(BIG_OUTPUT) == 2 and "t" * 10_000 in output
    return f"an output file of {len(output)} characters"


async def queue(harness, app, clock, **_) -> str:
    await create_board(app, clock, gpus=("CPU", "H100"))
    await raise_quota(app, ALICE)
    alice = Submitter(str(ALICE.id), ALICE.name)
    for _ in range(50):
        await app.service.submissions.submit(
            "identity", alice, "s.py", SOLUTION, gpus=["CPU", "H100"], mode=Mode.TEST
        )
    text = whole((await harness.command("queue")).only, "queue.txt")
    assert text.count("in line") == 100
    return "100 queued jobs, attached"


async def verifyruns(harness, app, clock, fake_launcher, monkeypatch, **_) -> str:
    from cluster_manager.core.gpus import GpuRegistry, GpuType

    types = {f"GPU-{i:02d}": GpuType(f"GPU-{i:02d}", "fake") for i in range(40)}
    monkeypatch.setattr(app, "registry", GpuRegistry(types))

    def failing(request: RunRequest) -> RunResult:
        return RunResult(False, Verdict.RUNTIME_ERROR, request.mode, "CUDA error: " + "c" * 400)

    fake_launcher.outcome = failing
    text = whole((await harness.command("verifyruns", ADMIN, timeout=60)).only, "verifyruns.txt")
    assert all(f"**GPU-{i:02d}**: runtime_error: CUDA error" in text for i in range(40))
    return "40 GPU types' checks, attached"


async def verifydb(harness, app, monkeypatch, **_) -> str:
    error = "could not read the migrations: " + "the server said something long. " * 200

    async def check() -> DatabaseCheck:
        return DatabaseCheck(True, 0.4, (), error)

    monkeypatch.setattr(app, "check_database", check)
    text = whole((await harness.command("verifydb", ADMIN)).only, "verifydb.txt")
    assert error in text
    return f"a database error of {len(error)} characters, attached"


async def an_echoed_option(harness, app, clock, **_) -> str:
    """Any command's error that echoes what the member typed (here /leaderboard show's name
    and /join's code) keeps its start."""
    shown = await harness.command("leaderboard show", name="n" * LONGEST_OPTION)
    assert_private_error(shown, "Not found", "n" * 100)
    joined = await harness.command("join", code="c" * LONGEST_OPTION)
    assert_private_error(joined, "Invite refused")
    assert all(len(r.only.content) <= MESSAGE_CHARS for r in (shown, joined))
    return "errors echoing 6,000-character options, cut"


async def team_show(harness, app, clock, **_) -> str:
    """100 teams of the longest names on a leaderboard, Alice's of 100 members."""
    await create_board(app, clock)
    await app.service.teams.set_rules("identity", size=100)
    alice = Submitter(str(ALICE.id), ALICE.name)
    await app.service.teams.create("identity", "a" * 40, alice)
    members = [f"{9 * 10**17 + i}" for i in range(99)]  # Discord ids, 18 digits
    for member in members:
        code = await app.service.teams.invite("identity", alice)
        await app.service.teams.join(code, Submitter(member, "m"))
    for i in range(99):
        await app.service.teams.create("identity", f"{i:02d}" + "t" * 38, Submitter(f"u{i}", "u"))
    mine = "\n".join(
        p["description"]
        for p in await all_pages(
            harness, await harness.command("team show", leaderboard="identity"), ALICE
        )
    )
    assert all(f"<@{m}>" in mine for m in members)
    every = await all_pages(
        harness, await harness.command("team show", leaderboard="identity", all=True), ALICE
    )
    text = "\n".join(p["description"] for p in every)
    assert text.count("**") == 200 and all(f"<@{m}>" in text for m in members)
    code = await harness.command("team join", code="c" * LONGEST_OPTION)
    assert_private_error(code, "Invite refused")
    return f"a team of 100 members; 100 teams in {len(every)} pages"


CASES = {
    "leaderboard list": leaderboard_list,
    "leaderboard show": leaderboard_show,
    "leaderboard show-personal": leaderboard_show_personal,
    "leaderboard submit": leaderboard_submit,
    "leaderboard get-submission": leaderboard_get_submission,
    "leaderboard task": leaderboard_task,
    "run": run,
    "queue": queue,
    "verifyruns": verifyruns,
    "verifydb": verifydb,
    "join": an_echoed_option,
    "team show": team_show,
}

SCHEDULED = {"leaderboard submit", "leaderboard get-submission"}


@pytest.mark.reliability(
    "Faults",
    "the longest answer of a command, with the most data it can meet",
    "Discord accepts every message; the whole content is there, paged or attached",
)
@pytest.mark.parametrize("command", sorted(CASES))
async def test_the_longest_answer_fits(
    command, make_harness, app, clock, fake_launcher, monkeypatch, record_property
):
    # The others store their runs themselves (a scheduler would run their queued jobs).
    harness = await make_harness(scheduler=command in SCHEDULED)
    observed = await CASES[command](
        harness, app=app, clock=clock, fake_launcher=fake_launcher, monkeypatch=monkeypatch
    )
    record_property("observed", observed)
    assert not harness.fake.refused


async def test_every_command_has_a_longest_answer_case_or_is_bounded():
    from tests.discord.test_limits_admin import ADMIN_CASES

    commands = await command_payload()
    leaves = {
        " ".join(path)
        for path, command in walk(commands)
        if not any(o["type"] in (1, 2) for o in command.get("options", []))
    }
    covered = set(CASES) | set(ADMIN_CASES)
    assert not covered & set(BOUNDED)
    assert leaves == covered | set(BOUNDED)
