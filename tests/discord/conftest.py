"""The real bot, logged in to the fake Discord API, fed raw interaction payloads.

Payloads go through `ConnectionState.parse_interaction_create`, as gateway events do, so the
command tree parses options, runs checks and autocompletes for real, and the view store
routes button and menu clicks. The guild (with its roles) is in the cache as a GUILD_CREATE
would put it there, which is what `member.roles` reads.
"""

from __future__ import annotations

import asyncio
import io
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import discord
import pytest

from cluster_manager.app import App
from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.models import Limits
from cluster_manager.core.task import load_task
from cluster_manager.discord.bot import BotConfig, ClusterBot
from cluster_manager.launchers.base import Launcher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.service import Service, Submitter
from cluster_manager.settings import Settings
from tests.conftest import BENCHMARK_CASE_S, EXAMPLES, Clock
from tests.discord.fake_discord import APP_ID, FakeDiscord, Message
from tests.support import replay
from tests.support.fakes import FakeLauncher

# Runs on the "local" GPU types are replayed unless a test is marked `real_runs`.
local_launcher = replay.local_launcher
replay_launcher = replay.replay_launcher

GUILD_ID = 700
CHANNEL_ID = 701
ADMIN_ROLE_ID = 711
CREATOR_ROLE_ID = 712
IDENTITY = EXAMPLES / "identity_py"
FAST = SchedulerConfig(lease_s=5, heartbeat_s=0.5, poll_s=0.05, limits=Limits())


@dataclass(frozen=True)
class Member:
    id: int
    name: str
    roles: tuple[int, ...] = ()


ALICE = Member(1001, "alice")
BOB = Member(1002, "bob")
ADMIN = Member(1003, "root", (ADMIN_ROLE_ID,))
CREATOR = Member(1004, "carol", (CREATOR_ROLE_ID,))


def _role(role_id: int, name: str, position: int) -> dict[str, Any]:
    return {
        "id": str(role_id),
        "name": name,
        "color": 0,
        "hoist": False,
        "position": position,
        "permissions": "0",
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }


CHANNEL = {
    "id": str(CHANNEL_ID),
    "type": 0,
    "guild_id": str(GUILD_ID),
    "name": "kernels",
    "position": 0,
    "permission_overwrites": [],
    "nsfw": False,
    "parent_id": None,
}
GUILD = {
    "id": str(GUILD_ID),
    "name": "GPU Mode",
    "owner_id": "1",
    "roles": [
        _role(GUILD_ID, "@everyone", 0),
        _role(ADMIN_ROLE_ID, "Leaderboard Admin", 2),
        _role(CREATOR_ROLE_ID, "Leaderboard Creator", 1),
    ],
    "channels": [CHANNEL],
    "members": [],
    "member_count": 4,
    "features": [],
    "emojis": [],
    "stickers": [],
    "unavailable": False,
}


def member_payload(member: Member) -> dict[str, Any]:
    return {
        "user": {
            "id": str(member.id),
            "username": member.name,
            "discriminator": "0",
            "global_name": member.name.title(),
            "avatar": None,
            "public_flags": 0,
        },
        "roles": [str(r) for r in member.roles],
        "joined_at": "2029-01-01T00:00:00+00:00",
        "deaf": False,
        "mute": False,
        "flags": 0,
        "permissions": "0",
    }


class Upload(dict):
    """An attachment option's resolved payload."""


@dataclass
class Reply:
    """What one interaction produced for the user to see."""

    fake: FakeDiscord
    token: str

    @property
    def messages(self) -> list[Message]:
        return self.fake.messages_of(self.token)

    @property
    def only(self) -> Message:
        messages = self.messages
        assert len(messages) == 1, [m.text() for m in messages]
        return messages[0]

    @property
    def choices(self) -> list[dict[str, Any]]:
        return self.fake.interactions[self.token].choices or []

    @property
    def acknowledged(self) -> bool:
        interaction = self.fake.interactions[self.token]
        return interaction.acknowledged and not interaction.late


class DiscordHarness:
    def __init__(self, bot: ClusterBot, fake: FakeDiscord) -> None:
        self.bot = bot
        self.fake = fake
        self.tasks: list[asyncio.Task[Any]] = []

    def upload(self, filename: str, data: bytes, **kwargs: Any) -> Upload:
        return Upload(self.fake.upload(filename, data, **kwargs))

    def _payload(self, kind: int, member: Member, data: dict[str, Any], **extra: Any) -> Any:
        interaction = self.fake.open_interaction(extra.pop("message_id", None))
        payload = {
            "id": str(interaction.id),
            "application_id": str(APP_ID),
            "type": kind,
            "token": interaction.token,
            "version": 1,
            "guild_id": str(GUILD_ID),
            "guild": {"id": str(GUILD_ID), "locale": "en-US", "features": []},
            "channel_id": str(CHANNEL_ID),
            "channel": CHANNEL,
            "member": member_payload(member),
            "data": data,
            "app_permissions": str(discord.Permissions.text().value),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(GUILD_ID)},
            "context": 0,
            "attachment_size_limit": 10 * 1024 * 1024,
            **extra,
        }
        return interaction.token, payload

    def _dispatch(self, payload: dict[str, Any]) -> list[asyncio.Task[Any]]:
        # The tree and the view store answer in tasks of their own: those are what we await.
        before = asyncio.all_tasks()
        self.bot._connection.parse_interaction_create(payload)
        started = list(asyncio.all_tasks() - before)
        self.tasks += started
        return started

    async def _finish(self, tasks: list[asyncio.Task[Any]], timeout: float) -> None:
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout)

    def start(
        self, path: str, member: Member = ALICE, *, focused: str | None = None, **options: Any
    ) -> tuple[Reply, list[asyncio.Task[Any]]]:
        """Invokes `/path` (or autocompletes `focused`) without waiting for the answer."""
        name, *sub = path.split()
        opts: list[dict[str, Any]] = []
        attachments: dict[str, Any] = {}
        members: dict[str, Any] = {}
        for key, value in options.items():
            if isinstance(value, Upload):
                opts.append({"name": key, "type": 11, "value": value["id"]})
                attachments[value["id"]] = dict(value)
                continue
            if isinstance(value, Member):  # a user option, resolved as Discord sends it
                opts.append({"name": key, "type": 6, "value": str(value.id)})
                members[str(value.id)] = member_payload(value)
                continue
            kind = {bool: 5, int: 4, float: 10}.get(type(value), 3)
            opts.append({"name": key, "type": kind, "value": value})
            if key == focused:
                opts[-1]["focused"] = True
        if sub:
            opts = [{"name": sub[0], "type": 1, "options": opts}]
        data: dict[str, Any] = {
            "id": "9000",
            "name": name,
            "type": 1,
            "options": opts,
            "guild_id": str(GUILD_ID),
        }
        resolved: dict[str, Any] = {}
        if attachments:
            resolved["attachments"] = attachments
        if members:
            resolved["users"] = {k: m["user"] for k, m in members.items()}
            resolved["members"] = {
                k: {key: v for key, v in m.items() if key != "user"} for k, m in members.items()
            }
        if resolved:
            data["resolved"] = resolved
        token, payload = self._payload(4 if focused else 2, member, data)
        return Reply(self.fake, token), self._dispatch(payload)

    async def submit_held(self, launcher: FakeLauncher) -> tuple[Reply, list[asyncio.Task[Any]]]:
        """ALICE's test-mode submission to identity, started and followed until its run is
        held at `launcher` (whose runs stay running until released) and its status shown."""
        reply, tasks = self.start(
            "leaderboard submit",
            script=self.upload("s.py", SOLUTION),
            leaderboard="identity",
            mode="test",
        )
        await self.fake.wait_for(lambda: launcher.runs and len(reply.messages) == 2)
        return reply, tasks

    async def command(
        self, path: str, member: Member = ALICE, *, timeout: float = 30, **options: Any
    ) -> Reply:
        reply, tasks = self.start(path, member, **options)
        await self._finish(tasks, timeout)
        return reply

    async def autocomplete(
        self, path: str, focused: str, member: Member = ALICE, **options: Any
    ) -> list[str]:
        reply, tasks = self.start(path, member, focused=focused, **options)
        await self._finish(tasks, 10)
        return [c["value"] for c in reply.choices]

    async def click(
        self,
        message: Message,
        label: str,
        member: Member = ALICE,
        *,
        values: list[str] | None = None,
    ) -> Reply:
        """Presses the button (or picks `values` in the menu) called `label` on `message`."""
        custom_id = message.custom_ids()[label]
        # The bot registers a view once Discord's reply to the send reaches it, a moment after
        # the message exists here; a person cannot click sooner, and neither does the test.
        views = self.bot._connection._view_store._views
        await self.fake.wait_for(lambda: message.id in views)
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": 2}
        if values is not None:
            data = {"custom_id": custom_id, "component_type": 3, "values": values}
        token, payload = self._payload(
            3,
            member,
            data,
            message_id=message.id,
            message=self.fake._payload(message) | {"channel_id": str(CHANNEL_ID)},
        )
        await self._finish(self._dispatch(payload), 10)
        return Reply(self.fake, token)

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        try:
            async with asyncio.timeout(10):
                await asyncio.gather(*self.tasks, return_exceptions=True)
        except TimeoutError:
            pending = [t for t in self.tasks if not t.done()]
            raise AssertionError(f"the bot's tasks outlived their cancel: {pending}") from None
        await self.bot.close()


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    fake.guild_id = GUILD_ID
    await fake.start()
    # discord.py builds every REST URL, webhooks included, from Route.BASE.
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
    yield fake
    await fake.stop()
    # Whatever a test did, no message went over Discord's limits (Discord would refuse it).
    assert not fake.refused, f"messages Discord would refuse: {fake.refused}"


@pytest.fixture
def fake_launcher() -> FakeLauncher:
    return FakeLauncher(polls=3)


@pytest.fixture
def launchers(local_launcher: Launcher, fake_launcher: FakeLauncher) -> dict[str, Launcher]:
    """Runs on "local" GPU types are replayed from recordings unless a test is marked
    `real_runs` (tests/support/replay.py)."""
    return {"local": local_launcher, "fake": fake_launcher}


@pytest.fixture
def app(
    pool: Any,
    db_url: str,
    registry: GpuRegistry,
    clock: Clock,
    launchers: dict[str, Launcher],
    tmp_path: Path,
) -> App:
    return App(
        settings=Settings(
            database_url=db_url,
            data_dir=tmp_path,
            local_memory_limit_mb=None,
            benchmark_case_s=BENCHMARK_CASE_S,
        ),
        database_url=db_url,
        embedded=False,
        pool=pool,
        registry=registry,
        launchers=launchers,
        service=Service(pool, registry, clock=clock),
    )


MakeHarness = Callable[..., Awaitable[DiscordHarness]]


@pytest.fixture
async def make_harness(fake_discord: FakeDiscord, app: App) -> AsyncIterator[MakeHarness]:
    made: list[DiscordHarness] = []

    async def make(*, scheduler: bool = False, **options: Any) -> DiscordHarness:
        defaults = {"scheduler": FAST, "edit_interval": 0.0, "view_timeout": 20.0}
        config = BotConfig(guild_id=GUILD_ID, run_scheduler=scheduler, **(defaults | options))
        bot = ClusterBot(app, config)
        await bot.login("fake-bot-token")
        bot._connection._add_guild_from_data(GUILD)  # as GUILD_CREATE does
        harness = DiscordHarness(bot, fake_discord)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        await harness.close()
    late = [i.token for i in fake_discord.interactions.values() if i.late]
    assert not late, "interactions acknowledged after Discord's 3 seconds"


@pytest.fixture
async def harness(make_harness: MakeHarness) -> DiscordHarness:
    return await make_harness()


# --- data ------------------------------------------------------------------------------------


SOLUTION = (IDENTITY / "submission.py").read_bytes()


def task_zip(directory: Path = IDENTITY) -> bytes:
    """A task folder as an uploaded zip (its `../utils.py` goes in beside task.yml)."""
    task = load_task(directory)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("task.yml", (directory / "task.yml").read_text().replace("../", ""))
        for f in task.files:
            if f.content is not None:
                archive.writestr(f.name, f.content)
        archive.writestr("template.py", (directory / "template.py").read_text())
    return buffer.getvalue()


async def create_board(
    app: App,
    clock: Clock,
    name: str = "identity",
    gpus: tuple[str, ...] = ("CPU",),
    *,
    creator: Member | None = None,
    rate_limit: int | None = None,
) -> None:
    await app.service.leaderboards.create(
        name,
        load_task(IDENTITY),
        clock.now + timedelta(days=3),
        list(gpus),
        creator=Submitter(str(creator.id), creator.name) if creator else None,
        rate_limit_per_hour=rate_limit,
    )
