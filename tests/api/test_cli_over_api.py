"""Every command of `cluster-manager` with CLUSTER_MANAGER_API_URL set, against a live server:
it acts on the server (its state is read back through the server's own service) or refuses
with one line and exit code 2; either way no database appears in the working folder."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_type_hints

import pytest

from cluster_manager.app import App
from cluster_manager.cli.api_client import ApiClient
from cluster_manager.cli.remote_service import RemoteService
from cluster_manager.core.models import Mode
from cluster_manager.core.records import ChannelPolicy
from cluster_manager.service import Service, Submitter
from cluster_manager.service.port import ServicePort
from tests.api.conftest import ADMIN_TOKEN, BOARD, IDENTITY, source, token_of
from tests.api.test_remote_cli import run_cli
from tests.conftest import EXAMPLES
from tests.storage.helpers import finish_submission

pytestmark = pytest.mark.timeout(300)

FUTURE = "2099-01-01T00:00:00+00:00"
ALICE = Submitter("alice", "alice")
BOB = Submitter("bob", "bob")
# What a case finds on the server first, as placeholders for its arguments ({sid}: alice's
# ranked submission, always there).
Setup = Callable[[Service], Awaitable[dict[str, str]]]
Check = Callable[[Service, int], Awaitable[bool]]


async def nothing(_service: Service) -> dict[str, str]:
    return {}


async def always(_service: Service, _sid: int) -> bool:
    return True


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    says: str  # in its standard output
    holds: Check = always  # the server's state afterwards
    before: Setup = nothing
    role: str = "admin"  # whose token it sends: "admin", "user" (alice's) or "none"
    extra: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def here(tmp_path: Path) -> Path:
    """The working folder of the commands: empty, and only theirs."""
    (tmp_path / "here").mkdir()
    return tmp_path / "here"


async def cm(
    app: App, url: str, cwd: Path, *args: str, role: str = "none"
) -> subprocess.CompletedProcess[str]:
    """The CLI pointed at the server, in `cwd`, with the data folder at its default (`.data`
    in the working folder): a database made by mistake would show there."""
    env = {"CLUSTER_MANAGER_DATA_DIR": ""}
    if role == "admin":
        env["CLUSTER_MANAGER_ADMIN_TOKEN"] = ADMIN_TOKEN
    token = await token_of(app, "alice") if role == "user" else None
    done = await run_cli(*args, url=url, token=token, cwd=cwd, env=env)
    assert not (cwd / ".data").exists(), args
    return done


async def paused(service: Service) -> dict[str, str]:
    await service.controls.pause(None, "outage", "org")
    return {}


async def banned(service: Service) -> dict[str, str]:
    await service.controls.ban(ALICE, "spam", "org")
    return {}


async def invalidated(service: Service) -> dict[str, str]:
    sid = (await service.history.submissions(ALICE))[0].submission.id
    await service.controls.invalidate(sid, "copied", "org")
    return {}


async def closed(service: Service) -> dict[str, str]:
    await service.invites.set_closed(BOARD, True)
    return {}


async def invite(service: Service) -> dict[str, str]:
    await service.invites.set_closed(BOARD, True)
    return {"code": (await service.invites.mint(BOARD, 1, 1, "org"))[0]}


async def quota(service: Service) -> dict[str, str]:
    await service.controls.set_quota(ALICE, per_hour=None, daily=2, actor="org")
    return {}


async def pause_reasons(service: Service, _sid: int) -> bool:
    return [p.reason for p in await service.controls.pauses()] == ["outage"]


async def no_pause(service: Service, _sid: int) -> bool:
    return await service.controls.pauses() == []


async def alice_banned(service: Service, _sid: int) -> bool:
    return [b.user for b in await service.controls.bans()] == ["alice"]


async def nobody_banned(service: Service, _sid: int) -> bool:
    return await service.controls.bans() == []


async def is_invalidated(service: Service, sid: int) -> bool:
    return (await service.submissions.report(sid)).submission.invalidated is not None


async def is_valid(service: Service, sid: int) -> bool:
    return (await service.submissions.report(sid)).submission.invalidated is None


async def rerun_queued(service: Service, sid: int) -> bool:
    return len((await service.submissions.report(sid)).jobs) == 4  # the pair, and the pair again


async def board_closed(service: Service, _sid: int) -> bool:
    return (await service.leaderboards.get(BOARD)).closed


async def channel_sees_all(service: Service, _sid: int) -> bool:
    board = await service.leaderboards.get(BOARD)
    return board.channel_policy is ChannelPolicy.ALL and [
        p.leaderboard for p in await service.controls.channel_policies()
    ] == [BOARD]


async def policy_set(service: Service) -> dict[str, str]:
    await service.controls.set_channel_policy(BOARD, ChannelPolicy.NONE, "org")
    return {}


async def runs_after_the_deadline_refused(service: Service) -> dict[str, str]:
    await service.controls.set_after_deadline_runs(BOARD, False, "org")
    return {}


async def no_runs_after_the_deadline(service: Service, _sid: int) -> bool:
    return not (await service.leaderboards.get(BOARD)).after_deadline_runs


async def board_open(service: Service, _sid: int) -> bool:
    return not (await service.leaderboards.get(BOARD)).closed


async def two_invites(service: Service, _sid: int) -> bool:
    return len(await service.invites.all(BOARD)) == 2


async def invite_revoked(service: Service, _sid: int) -> bool:
    return [i.revoked for i in await service.invites.all(BOARD)] == [True]


async def daily_two(service: Service, _sid: int) -> bool:
    custom = (await service.controls.quota_of("alice")).custom
    return custom is not None and custom.daily == 2


async def no_quota(service: Service, _sid: int) -> bool:
    return await service.controls.custom_quotas() == []


async def created(service: Service, _sid: int) -> bool:
    board = await service.leaderboards.get("fresh")
    return board.gpus == ("CPU",) and board.task.name == "identity_py"


async def deleted(service: Service, _sid: int) -> bool:
    return await service.leaderboards.all(include_closed=True) == []


async def alice_member(service: Service, _sid: int) -> bool:
    return [b.name for b in await service.leaderboards.all(ALICE)] == [BOARD]


async def submitted_again(service: Service, _sid: int) -> bool:
    return len(await service.history.submissions(ALICE)) == 2


async def alice_team(service: Service) -> dict[str, str]:
    await service.teams.create(BOARD, "red", ALICE)
    return {}


async def bobs_code(service: Service) -> dict[str, str]:
    await service.teams.create(BOARD, "red", BOB)
    return {"code": await service.teams.invite(BOARD, BOB)}


async def alice_in_red(service: Service, _sid: int) -> bool:
    team = await service.teams.of_user(BOARD, ALICE)
    return team is not None and team.name == "red"


async def alice_in_no_team(service: Service, _sid: int) -> bool:
    return await service.teams.of_user(BOARD, ALICE) is None


async def red_of_two(service: Service, _sid: int) -> bool:
    return [t.members for t in await service.teams.all(BOARD)] == [("bob", "alice")]


async def shared_pairs(service: Service, _sid: int) -> bool:
    board = await service.leaderboards.get(BOARD)
    return (board.team_size, board.team_quotas) == (2, True)


CASES = {
    "admin pause": Case(("admin", "pause", "--reason", "outage"), "paused everywhere: outage",
                        pause_reasons),
    "admin resume": Case(("admin", "resume"), "resumed everywhere", no_pause, paused),
    "admin ban": Case(("admin", "ban", "alice", "--reason", "spam"), "banned alice: spam",
                      alice_banned),
    "admin unban": Case(("admin", "unban", "alice"), "unbanned alice", nobody_banned, banned),
    "admin invalidate": Case(("admin", "invalidate", "{sid}", "--reason", "copied"),
                             "invalidated submission", is_invalidated),
    "admin restore": Case(("admin", "restore", "{sid}"), "restored submission", is_valid,
                          invalidated),
    "admin rerun": Case(("admin", "rerun", BOARD), "queued 1 submission of identity again (",
                        rerun_queued),
    "admin close": Case(("admin", "close", BOARD), "identity is invite-only", board_closed),
    "admin open": Case(("admin", "open", BOARD), "identity is open to everyone", board_open,
                       closed),
    "admin invites --mint": Case(("admin", "invites", BOARD, "--mint", "2"), "inv_",
                                 two_invites),
    "admin invites": Case(("admin", "invites", BOARD), "0/1 used", before=invite),
    "admin revoke-invite": Case(("admin", "revoke-invite", "{code}"), "revoked inv_",
                                invite_revoked, invite),
    "admin quota --daily": Case(("admin", "quota", "alice", "--daily", "2"),
                                "quotas of alice: per hour default, daily 2", daily_two),
    "admin quota": Case(("admin", "quota", "alice"), "daily, all leaderboards: 2 (custom)",
                        before=quota),
    "admin quota --clear": Case(("admin", "quota", "alice", "--clear"),
                                "alice has the deployment's quotas", no_quota, quota),
    "admin status": Case(("admin", "status"), "paused everywhere: outage", before=paused),
    "admin status (channel policies)": Case(("admin", "status"),
                                            "identity's channel policy none", before=policy_set),
    "admin status (runs after the deadline)": Case(
        ("admin", "status"), "identity takes no runs after its deadline (org)",
        before=runs_after_the_deadline_refused),
    "admin channel-policy": Case(("admin", "channel-policy", BOARD, "all"),
                                 "identity's channel policy is all", channel_sees_all),
    "admin after-deadline": Case(("admin", "after-deadline", BOARD, "off"),
                                 "identity takes no runs after its deadline",
                                 no_runs_after_the_deadline),
    "admin stats": Case(("admin", "stats"), "1 submission from 1 user ("),
    "leaderboard create": Case(
        ("leaderboard", "create", "fresh", "--task", str(IDENTITY), "--deadline", FUTURE,
         "--gpu", "CPU"), "created fresh on CPU until 2099-01-01", created),
    "leaderboard delete": Case(("leaderboard", "delete", BOARD, "--yes"), "deleted identity",
                               deleted),
    "leaderboard list": Case(("leaderboard", "list"), "CPU, CPU2", role="none"),
    "leaderboard show": Case(("leaderboard", "show", BOARD), "#1    alice", role="none"),
    "leaderboard show --after-deadline": Case(
        ("leaderboard", "show", BOARD, "--after-deadline"),
        "no run after the deadline is ranked yet", role="none"),
    "leaderboard task": Case(("leaderboard", "task", BOARD), "reference.py", role="none"),
    "leaderboard template": Case(("leaderboard", "template", BOARD, "python"),
                                 "def custom_kernel", role="none"),
    "join": Case(("join", "{code}"), "joined identity", alice_member, invite, role="user"),
    "queue": Case(("queue",), "CPU2", role="user"),
    "submit --no-wait": Case(
        ("submit", BOARD, str(IDENTITY / "submission.py"), "--gpu", "CPU", "--mode", "test",
         "--no-wait"), "", submitted_again, role="user"),
    "team create": Case(("team", "create", BOARD, "red"), "created team red on identity",
                        alice_in_red, role="user"),
    "team invite": Case(("team", "invite", BOARD), "team_", alice_in_red, alice_team,
                        role="user"),
    "team join": Case(("team", "join", "{code}"), "joined team red on identity", red_of_two,
                      bobs_code, role="user"),
    "team leave": Case(("team", "leave", BOARD), "left team red on identity", alice_in_no_team,
                       alice_team, role="user"),
    "team show": Case(("team", "show", BOARD), "red on identity (1/4 members)\n  alice",
                      before=alice_team, role="user"),
    "team show (no team)": Case(("team", "show", BOARD), "you are in no team on identity",
                                alice_in_no_team, role="user"),
    "team list": Case(("team", "list", BOARD), "red on identity (1/4 members)", before=alice_team,
                      role="none"),
    "admin teams": Case(("admin", "teams", BOARD, "--size", "2", "--shared-quota"),
                        "identity: teams of up to 2; the hourly quota is shared by each team",
                        shared_pairs),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
async def test_each_command_acts_on_the_server(app: App, live_url: str, here: Path, name):
    case = CASES[name]
    receipt = await app.service.submissions.submit(
        BOARD, ALICE, "submission.py", source(), gpus=["CPU"], mode=Mode.LEADERBOARD
    )
    await finish_submission(app.pool, receipt, 1e-6)
    values = {"sid": str(receipt.submission_id), **await case.before(app.service)}
    args = [a.format(**values) for a in case.args]
    done = await cm(app, live_url, here, *args, role=case.role)
    assert done.returncode == 0, done.stdout + done.stderr
    assert case.says in done.stdout, done.stdout
    assert await case.holds(app.service, receipt.submission_id)


async def test_submit_names_the_tokens_user(app: App, live_url: str, here: Path):
    solution = str(IDENTITY / "submission.py")
    args = ("submit", BOARD, solution, "--gpu", "CPU", "--mode", "test", "--no-wait")
    done = await cm(app, live_url, here, *args, role="user")
    assert done.returncode == 0, done.stderr
    (sid,) = [r.submission.id for r in await app.service.history.submissions(ALICE)]
    assert f"submission {sid}: submission.py to identity (test mode) as alice" in done.stderr


REFUSED = {
    "user token": (("user", "token", "bob"), "`user token` works only on a database"),
    "user token --revoke": (
        ("user", "token", "alice", "--revoke"),
        "`user token` works only on a database",
    ),
    "leaderboard export": (("leaderboard", "export", BOARD), "`leaderboard export` reads"),
    "leaderboard sync": (
        ("leaderboard", "sync", str(EXAMPLES / "spring_round.yaml")),
        "`leaderboard sync` reads the problem set's folders",
    ),
    "db migrate": (("db", "migrate"), "`db migrate` migrates a database that it opens itself"),
    "worker": (("worker",), "`worker` runs the queue of a database that it opens itself"),
    "demo": (("demo",), "`demo` fills a database with examples that it opens itself"),
    "leaderboard delete without --yes": (
        ("leaderboard", "delete", BOARD),
        "deleting 'identity' removes all its submissions; pass --yes to confirm",
    ),
    "team show --user": (
        ("team", "show", BOARD, "--user", "bob"),
        "--user is for the database: through the API you act as your token's user",
    ),
    "admin ban of a name nobody used": (
        ("admin", "ban", "nosuch", "--reason", "spam"),
        "nobody named 'nosuch' has submitted here",
    ),
}


@pytest.mark.reliability(
    "Bad input",
    "a CLI command the HTTP API does not offer, with CLUSTER_MANAGER_API_URL set",
    "one error line saying why, exit 2; nothing changes on the server and no local database",
)
@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_what_the_api_does_not_offer_is_refused_in_one_line(
    app: App, live_url: str, here: Path, name, record_property
):
    args, says = REFUSED[name]
    await app.service.accounts.issue_token(ALICE)
    tokens = await app.pool.fetchval("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL")
    done = await cm(app, live_url, here, *args, role="admin")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    record_property("observed", f"{name}: {line}")
    assert line.startswith("error: ") and says in line, line
    assert list(here.iterdir()) == []  # nothing written here: no export, no database
    assert [b.name for b in await app.service.leaderboards.all()] == [BOARD]
    assert await app.service.controls.bans() == []
    after = await app.pool.fetchval("SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL")
    assert after == tokens == 1


async def test_commands_that_need_no_server_run_here(app: App, live_url: str, here: Path):
    """`eval` and `leaderboard check` run on this machine, `bot --print-commands` needs no
    database: with the URL set they work as without it, and make no database."""
    solution = str(IDENTITY / "submission.py")
    evaluated = await cm(app, live_url, here, "eval", str(IDENTITY), solution, "--mode", "test")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    checked = await cm(app, live_url, here, "leaderboard", "check", str(IDENTITY))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    commands = await cm(app, live_url, here, "bot", "--print-commands")
    assert commands.returncode == 0 and json.loads(commands.stdout)


async def test_the_clients_implement_every_operation_of_the_port(app: App):
    """mypy holds the signatures (cli/common.py assigns both to a `ServicePort`); this holds
    that neither lacks a part or a method of one that the CLI could call."""
    parts = {
        name: get_type_hints(member.fget)["return"]
        for name, member in vars(ServicePort).items()
        if isinstance(member, property)
    }
    assert {"leaderboards", "submissions", "controls", "teams"} <= parts.keys()
    async with ApiClient("http://127.0.0.1:1", None) as api:
        remote = RemoteService(api)
    for name, protocol in parts.items():
        wanted = [n for n in vars(protocol) if not n.startswith("_")]
        assert wanted, name
        for implementation in (remote, app.service):
            part = getattr(implementation, name)
            assert all(callable(getattr(part, n, None)) for n in wanted), (name, part)
