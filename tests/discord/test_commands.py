"""The command tree itself: descriptions, names, the synced JSON, and `bot --print-commands`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from cluster_manager.cli import logs
from cluster_manager.cli.common import cli
from cluster_manager.discord.bot import ClusterBot
from cluster_manager.storage.singletons import lock_key

SNAPSHOT = Path(__file__).with_name("commands.snapshot.json")
NAME = re.compile(r"^[-_a-z0-9]{1,32}$")
# Make any connection attempt in the child fail loudly.
NO_NETWORK = """
import socket

def _refuse(*args, **kwargs):
    raise OSError("network access in a test that must not use the network")

socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
"""


async def command_payload() -> list[dict]:
    bot = ClusterBot(None)
    await bot.load_cogs()
    return bot.command_payload()


def walk(commands: list[dict], parents: tuple[str, ...] = ()):
    for command in commands:
        path = (*parents, command["name"])
        yield path, command
        subcommands = [o for o in command.get("options", []) if o["type"] in (1, 2)]
        yield from walk(subcommands, path)


async def test_every_command_and_option_has_a_description_and_a_unique_name():
    commands = await command_payload()
    top = [c["name"] for c in commands]
    assert len(top) == len(set(top))
    assert set(top) == {
        "admin",
        "leaderboard",
        "run",
        "ping",
        "queue",
        "verifydb",
        "verifyruns",
        "resync",
        "token",
        "join",
        "team",
    }
    for path, command in walk(commands):
        assert NAME.match(command["name"]), path
        assert 1 <= len(command["description"]) <= 100, path
        options = [o for o in command.get("options", []) if o["type"] not in (1, 2)]
        names = [o["name"] for o in options]
        assert len(names) == len(set(names)), path
        for option in options:
            assert NAME.match(option["name"]), (path, option["name"])
            assert 1 <= len(option["description"]) <= 100, (path, option["name"])
        required = [o.get("required", False) for o in options]
        assert required == sorted(required, reverse=True), f"{path}: required options go first"
    subcommands = {p[-1] for p, _ in walk(commands) if p[0] == "leaderboard" and len(p) == 2}
    assert subcommands == {
        "submit",
        "get-submission",
        "create",
        "delete",
        "list",
        "show",
        "show-personal",
        "task",
        "template",
    }


async def test_synced_commands_match_the_snapshot():
    payload = await command_payload()
    text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert SNAPSHOT.is_file(), "run with UPDATE_SNAPSHOTS=1 to write the snapshot"
    assert text == SNAPSHOT.read_text(encoding="utf-8"), (
        "the commands changed: review them, then run with UPDATE_SNAPSHOTS=1"
    )


def run_cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "guard").mkdir(exist_ok=True)
    (tmp_path / "guard" / "sitecustomize.py").write_text(NO_NETWORK)
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DISCORD_", "DATABASE_URL", "CLUSTER_MANAGER_"))
    }
    clean |= {
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "guard"), *sys.path]),
        "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "cluster_manager", "bot", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # no .env here
        env=clean,
    )


def test_print_commands_needs_no_token_network_or_database(tmp_path: Path):
    done = run_cli(tmp_path, "--print-commands")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert [c["name"] for c in printed] == [
        "leaderboard",
        "run",
        "ping",
        "queue",
        "verifydb",
        "verifyruns",
        "resync",
        "token",
        "join",
        "team",
        "admin",
    ]
    assert not (tmp_path / "data").exists()  # no embedded database was started


@pytest.mark.reliability(
    "Access",
    "starting the bot without its token; in --debug mode with only the other token set",
    "a one-line error; the token that was set is never echoed",
)
def test_a_missing_token_is_a_one_line_error(tmp_path: Path, record_property):
    done = run_cli(tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: DISCORD_TOKEN is not set (environment or .env)"
    ]
    debug = run_cli(tmp_path, "--debug", DISCORD_TOKEN="not-the-debug-one")
    record_property(
        "observed",
        f"{done.stderr.strip()!r}; --debug: {debug.stderr.strip().splitlines()[-1:]!r}, "
        f"token echoed: {'not-the-debug-one' in debug.stderr}",
    )
    assert debug.returncode == 2
    assert "DISCORD_DEBUG_TOKEN is not set" in debug.stderr
    assert "not-the-debug-one" not in debug.stderr


def test_the_bot_command_opens_the_app_and_starts_the_bot(db_url, tmp_path, monkeypatch):
    started = {}

    async def start(self, token: str, *, reconnect: bool = True) -> None:
        started.update(
            token=token,
            config=self.config,
            database=await self.app.pool.fetchval("SELECT current_database()"),
        )

    monkeypatch.setattr(ClusterBot, "start", start)
    monkeypatch.setattr(logs, "configure_logging", lambda *args, **kwargs: None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("DISCORD_GUILD_ID=123\nDISCORD_TOKEN=from-dotenv\n")
    env = {"DISCORD_TOKEN": "from-env", "DATABASE_URL": db_url, "DISCORD_DEBUG_TOKEN": None}
    done = CliRunner().invoke(cli, ["bot", "--sync", "--no-scheduler"], env=env)
    assert done.exit_code == 0, done.output
    assert started["token"] == "from-env"  # the environment wins over .env
    assert started["config"].guild_id == 123
    assert started["config"].sync_commands and not started["config"].run_scheduler
    assert db_url.endswith("/" + started["database"])


def test_a_bad_guild_id_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"DISCORD_TOKEN": "t", "DISCORD_GUILD_ID": "general"}
    done = CliRunner().invoke(cli, ["bot"], env=env)
    assert done.exit_code == 2
    assert "DISCORD_GUILD_ID must be a Discord id" in done.output


def test_a_second_bot_on_the_same_token_is_refused_naming_the_first(db_url, tmp_path, monkeypatch):
    """Discord hands each interaction to one connection: a second process on the token would
    leave commands unanswered. It stops before connecting, saying which process runs."""
    monkeypatch.setattr(ClusterBot, "start", lambda *a, **k: pytest.fail("the bot started"))
    monkeypatch.setattr(logs, "configure_logging", lambda *args, **kwargs: None)
    monkeypatch.chdir(tmp_path)
    env = {"DISCORD_TOKEN": "same-token", "DATABASE_URL": db_url, "DISCORD_DEBUG_TOKEN": None}
    with psycopg.connect(db_url, autocommit=True) as first:
        first.execute("SET application_name = 'cluster-manager Discord bot on host-a, pid 42'")
        key = lock_key("Discord bot", "same-token")
        assert first.execute("SELECT pg_try_advisory_lock(%s)", [key]).fetchone() == (True,)
        done = CliRunner().invoke(cli, ["bot", "--no-scheduler"], env=env)
    assert done.exit_code == 2
    holder = "cluster-manager Discord bot on host-a, pid 42"
    assert f"a Discord bot already runs for this key: {holder}" in done.output
    assert "same-token" not in done.output
