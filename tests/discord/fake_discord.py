"""A fake Discord HTTP API on 127.0.0.1: what discord.py calls, recorded and answered.

It keeps the messages users would see, with Discord's rules where they matter:
- a message over Discord's limits (2,000 characters of content, embed sizes, ten files of
  10 MiB) is refused 400 "Invalid Form Body", as Discord does, and noted in `refused`;
- an interaction must be acknowledged once, within 3 seconds;
- the first followup after a deferral replaces the "thinking…" message and keeps its
  visibility (an ephemeral deferral makes an ephemeral answer);
- once the original is answered, followups are new messages with their own flags;
- an expired interaction token (15 minutes in real life, `expire()` here) gets 401.

Every request is recorded (method, path, JSON body, uploaded files). Attachments for the
bot to download are served from `/attachments/...`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

APP_ID = 4242
BOT_USER = {
    "id": str(APP_ID),
    "username": "cluster-bot",
    "discriminator": "0",
    "global_name": "Cluster Bot",
    "avatar": None,
    "bot": True,
    "public_flags": 0,
}
EPHEMERAL = 64
LOADING = 128
ACK_WINDOW_S = 3.0

# Discord's limits on what one message holds (its "Invalid Form Body" beyond them).
CONTENT_CHARS = 2000
EMBEDS = 10
EMBED_TOTAL_CHARS = 6000
EMBED_FIELDS = 25
EMBED_CHARS = {"title": 256, "description": 4096}
FIELD_CHARS = {"name": 256, "value": 1024}
FILES = 10
FILE_BYTES = 10 * 1024 * 1024  # a server without boosts

_WEBHOOK = re.compile(r"/webhooks/(?P<app>\d+)/(?P<token>[^/]+)(?:/messages/(?P<mid>[^/]+))?")
_CALLBACK = re.compile(r"/interactions/(?P<iid>\d+)/(?P<token>[^/]+)/callback")
_CHANNEL_MESSAGES = re.compile(r"/channels/(?P<cid>\d+)/messages(?:/(?P<mid>\d+))?")
_DM_CHANNELS = "/users/@me/channels"
_USER = re.compile(r"/users/(?P<uid>\d+)")
_CHANNEL = re.compile(r"/channels/(?P<cid>\d+)")
_COMMANDS = re.compile(r"/applications/(?P<app>\d+)(?:/guilds/(?P<gid>\d+))?/commands")


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    files: dict[str, bytes]


@dataclass
class Message:
    id: int
    channel_id: int
    token: str | None  # the interaction it answers, None for channel messages
    content: str = ""
    embeds: list[dict[str, Any]] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    flags: int = 0
    loading: bool = False
    deleted: bool = False
    history: list[str] = field(default_factory=list)  # content after each change

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def edits(self) -> int:
        return len(self.history) - 1

    def custom_ids(self) -> dict[str, str]:
        """Label (or placeholder) -> custom id of each component."""
        found = {}
        for row in self.components:
            for item in row.get("components", []):
                key = item.get("label") or item.get("placeholder") or item.get("custom_id")
                found[key] = item.get("custom_id")
        return found

    def text(self) -> str:
        """Everything a user reads: content and embeds."""
        parts = [self.content]
        for embed in self.embeds:
            parts += [embed.get("title", ""), embed.get("description", "")]
            for f in embed.get("fields", []):
                parts += [f.get("name", ""), f.get("value", "")]
            parts.append(embed.get("footer", {}).get("text", ""))
        return "\n".join(p for p in parts if p)


@dataclass
class Interaction:
    id: int
    token: str
    created: float
    message_id: int | None = None  # the message a component sits on
    acknowledged: bool = False
    original: Message | None = None
    choices: list[dict[str, Any]] | None = None
    late: bool = False


class FakeDiscord:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.messages: dict[int, Message] = {}
        self.interactions: dict[str, Interaction] = {}
        self.uploads: dict[int, tuple[str, bytes]] = {}
        self.synced: list[dict[str, Any]] = []
        self.expired: set[str] = set()
        self.refused: list[list[str]] = []  # bodies over Discord's limits, as it would refuse
        self.dm_channels: dict[int, int] = {}  # DM channel id -> its user's id
        self.dms_closed: set[int] = set()  # users who take no DMs from the bot (403 50007)
        self._failures: list[list[Any]] = []  # [method, path pattern, status, times left]
        self.guild_id = 0  # the server's, as a channel read by id names it
        self._ids = itertools.count(10_000)
        self._runner: web.AppRunner | None = None
        self.base = ""
        self.changed = asyncio.Event()

    # --- lifetime ------------------------------------------------------------------------

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base = f"http://127.0.0.1:{port}"
        return self.base

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        return f"{self.base}/api/v10"

    # --- what tests set up -----------------------------------------------------------------

    def new_id(self) -> int:
        return next(self._ids)

    def upload(self, filename: str, data: bytes, *, size: int | None = None) -> dict[str, Any]:
        """An attachment payload as Discord resolves it; `size` may claim another size."""
        aid = self.new_id()
        self.uploads[aid] = (filename, data)
        url = f"{self.base}/attachments/{aid}/{filename}"
        return {
            "id": str(aid),
            "filename": filename,
            "size": len(data) if size is None else size,
            "url": url,
            "proxy_url": url,
            "content_type": "application/octet-stream",
        }

    def open_interaction(self, message_id: int | None = None) -> Interaction:
        iid = self.new_id()
        made = Interaction(iid, f"tok-{iid}-secretish", time.monotonic(), message_id=message_id)
        self.interactions[made.token] = made
        return made

    def expire(self, token: str) -> None:
        self.expired.add(token)

    def fail(self, method: str, pattern: str, status: int, times: int) -> None:
        """Answers the next `times` requests matching `method` and the path `pattern` with
        `status` (500s, or 429 with a short retry_after), as Discord does in an outage."""
        self._failures.append([method, re.compile(pattern), status, times])

    def _injected(self, method: str, path: str) -> web.Response | None:
        for failure in self._failures:
            if failure[3] > 0 and failure[0] == method and failure[1].search(path):
                failure[3] -= 1
                if failure[2] == 429:
                    body = {"message": "You are being rate limited.", "retry_after": 0.01}
                    return web.json_response(
                        {**body, "global": False}, status=429, headers={"Retry-After": "0.01"}
                    )
                return _error(failure[2], 0, "Internal Server Error")
        return None

    # --- what tests read -------------------------------------------------------------------

    def messages_of(self, token: str) -> list[Message]:
        return [m for m in self.messages.values() if m.token == token and not m.deleted]

    def channel_messages(self) -> list[Message]:
        """What the server's channel shows (DMs are not in it)."""
        return [
            m
            for m in self.messages.values()
            if m.token is None and not m.deleted and m.channel_id not in self.dm_channels
        ]

    def direct_messages(self, user_id: int) -> list[Message]:
        return [
            m
            for m in self.messages.values()
            if not m.deleted and self.dm_channels.get(m.channel_id) == user_id
        ]

    def downloads(self) -> list[str]:
        return [r.path for r in self.requests if r.path.startswith("/attachments/")]

    def calls(self, method: str, pattern: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = predicate()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError("the fake Discord API never saw what the test waited for")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.05)

    # --- the API -----------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body, files = await _read_body(request)
        path = request.path
        self.requests.append(Recorded(request.method, path, dict(request.query), body, files))
        if (injected := self._injected(request.method, path)) is not None:
            return injected
        message = (body.get("data") or {}) if _CALLBACK.search(path) else body
        if isinstance(message, dict) and (problems := over_limits(message, files)):
            self.refused.append(problems)
            return _error(400, 50035, "Invalid Form Body: " + "; ".join(problems))
        try:
            return await self._route(request.method, path, body, files)
        finally:
            self.changed.set()

    async def _route(
        self, method: str, path: str, body: Any, files: dict[str, bytes]
    ) -> web.StreamResponse:
        if path.startswith("/attachments/"):
            aid = int(path.split("/")[2])
            return web.Response(body=self.uploads[aid][1])
        if not path.startswith("/api/v10/"):
            return _error(404, 0, "not found")
        route = path.removeprefix("/api/v10")
        if route == "/users/@me":
            return _json(BOT_USER)
        if route == "/oauth2/applications/@me":
            return _json(_application())
        if match := _CALLBACK.fullmatch(route):
            return self._callback(match["token"], body, files)
        if match := _WEBHOOK.fullmatch(route):
            return self._webhook(method, match["token"], match["mid"], body, files)
        if (match := _USER.fullmatch(route)) and method == "GET":
            return _json(_user(int(match["uid"])))
        if (match := _CHANNEL.fullmatch(route)) and method == "GET":
            return self._channel_info(int(match["cid"]))
        if route == _DM_CHANNELS and method == "POST":
            return self._open_dm(int(body["recipient_id"]))
        if match := _CHANNEL_MESSAGES.fullmatch(route):
            return self._channel(method, int(match["cid"]), match["mid"], body, files)
        if (match := _COMMANDS.fullmatch(route)) and method == "PUT":
            self.synced = [
                {**c, "id": str(self.new_id()), "application_id": str(APP_ID), "version": "1"}
                for c in body
            ]
            return _json(self.synced)
        return _error(404, 0, f"no fake for {method} {route}")

    def _callback(self, token: str, body: dict[str, Any], files: dict[str, bytes]) -> web.Response:
        interaction = self.interactions.get(token)
        if interaction is None:
            return _error(404, 10062, "Unknown interaction")
        if interaction.acknowledged:
            return _error(400, 40060, "Interaction has already been acknowledged.")
        if time.monotonic() - interaction.created > ACK_WINDOW_S:
            interaction.late = True
            return _error(404, 10062, "Unknown interaction")
        interaction.acknowledged = True
        kind, data = body["type"], body.get("data") or {}
        message: Message | None = None
        if kind == 4:  # a message
            message = self._new_message(token, data, data.get("flags", 0), files)
            interaction.original = message
        elif kind == 5:  # "thinking…"
            flags = data.get("flags", 0)
            message = self._new_message(token, {}, flags | LOADING)
            message.loading = True
            interaction.original = message
        elif kind == 7:  # update the message the component sits on
            message = self.messages[interaction.message_id]  # type: ignore[index]
            self._apply(message, data, files)
        elif kind == 8:
            interaction.choices = data["choices"]
        answer: dict[str, Any] = {
            "interaction": {
                "id": str(interaction.id),
                "type": 2,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(message and message.ephemeral),
            },
            "resource": {"type": kind},
        }
        if message is not None:
            answer["interaction"]["response_message_id"] = str(message.id)
            answer["resource"]["message"] = self._payload(message)
        return _json(answer)

    def _webhook(
        self, method: str, token: str, mid: str | None, body: Any, files: dict[str, bytes]
    ) -> web.Response:
        if token in self.expired:
            return _error(401, 50027, "Invalid Webhook Token")
        interaction = self.interactions.get(token)
        if interaction is None:
            return _error(404, 10015, "Unknown Webhook")
        if mid is None and method == "POST":
            original = interaction.original
            if original is not None and original.loading:
                # The first followup takes over the deferred message, visibility included.
                self._apply(original, {k: v for k, v in body.items() if k != "flags"}, files)
                return _json(self._payload(original))
            message = self._new_message(token, body, body.get("flags", 0), files)
            return _json(self._payload(message))
        target = interaction.original if mid == "@original" else self.messages.get(int(mid or 0))
        if target is None or target.deleted or target.token != token:
            return _error(404, 10008, "Unknown Message")
        if method == "PATCH":
            self._apply(target, body, files)
            return _json(self._payload(target))
        if method == "DELETE":
            target.deleted = True
            if target is interaction.original:
                interaction.original = None
            return web.Response(status=204)
        return _json(self._payload(target))

    def _open_dm(self, user_id: int) -> web.Response:
        cid = next((c for c, u in self.dm_channels.items() if u == user_id), None)
        if cid is None:
            cid = self.new_id()
            self.dm_channels[cid] = user_id
        recipient = _user(user_id)
        return _json(
            {"id": str(cid), "type": 1, "recipients": [recipient], "last_message_id": None}
        )

    def _channel_info(self, cid: int) -> web.Response:
        if cid in self.dm_channels:
            recipient = _user(self.dm_channels[cid])
            return _json({"id": str(cid), "type": 1, "recipients": [recipient]})
        return _json(
            {
                "id": str(cid),
                "type": 0,
                "guild_id": str(self.guild_id),
                "name": "kernels",
                "position": 0,
                "permission_overwrites": [],
            }
        )

    def _channel(
        self, method: str, cid: int, mid: str | None, body: Any, files: dict[str, bytes]
    ) -> web.Response:
        if self.dm_channels.get(cid) in self.dms_closed:
            return _error(403, 50007, "Cannot send messages to this user")
        if method == "POST" and mid is None:
            message = self._new_message(None, body, body.get("flags", 0), files, channel_id=cid)
            return _json(self._payload(message))
        target = self.messages.get(int(mid or 0))
        if target is None:
            return _error(404, 10008, "Unknown Message")
        if method == "PATCH":
            self._apply(target, body, files)
        return _json(self._payload(target))

    # --- messages ----------------------------------------------------------------------

    def _new_message(
        self,
        token: str | None,
        body: dict[str, Any],
        flags: int,
        files: dict[str, bytes] | None = None,
        *,
        channel_id: int = 0,
    ) -> Message:
        message = Message(self.new_id(), channel_id, token, flags=flags)
        self.messages[message.id] = message
        self._apply(message, body, files or {})
        return message

    def _apply(self, message: Message, body: dict[str, Any], files: dict[str, bytes]) -> None:
        if message.loading and (body or files):
            message.loading = False
            message.flags &= ~LOADING
        if "content" in body:
            message.content = body["content"] or ""
        if "embeds" in body:
            message.embeds = body["embeds"] or []
        if "components" in body:
            message.components = body["components"] or []
        if files:
            message.files = dict(files)
            message.attachments = [
                {
                    "id": str(self.new_id()),
                    "filename": name,
                    "size": len(data),
                    "url": f"{self.base}/files/{name}",
                    "proxy_url": f"{self.base}/files/{name}",
                }
                for name, data in files.items()
            ]
        elif "attachments" in body:
            kept = {str(a.get("id")) for a in body["attachments"] or []}
            message.attachments = [a for a in message.attachments if a["id"] in kept]
            message.files = {
                a["filename"]: message.files[a["filename"]]
                for a in message.attachments
                if a["filename"] in message.files
            }
        if body or files:
            message.history.append(message.content)

    def _payload(self, message: Message) -> dict[str, Any]:
        return {
            "id": str(message.id),
            "channel_id": str(message.channel_id),
            "type": 0,
            "content": message.content,
            "embeds": message.embeds,
            "components": message.components,
            "attachments": message.attachments,
            "flags": message.flags,
            "author": BOT_USER,
            "timestamp": "2030-01-01T12:00:00+00:00",
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "pinned": False,
            "webhook_id": str(APP_ID),
            "application_id": str(APP_ID),
        }


def over_limits(body: dict[str, Any], files: dict[str, bytes]) -> list[str]:
    """What of a message body Discord would refuse, as its error names it; [] when none."""
    problems = []
    if len(body.get("content") or "") > CONTENT_CHARS:
        problems.append(f"content: {len(body['content'])} characters > {CONTENT_CHARS}")
    embeds = body.get("embeds") or []
    if len(embeds) > EMBEDS:
        problems.append(f"embeds: {len(embeds)} > {EMBEDS}")
    total = 0
    for i, embed in enumerate(embeds):
        for key, most in EMBED_CHARS.items():
            if len(embed.get(key) or "") > most:
                problems.append(f"embeds.{i}.{key}: {len(embed[key])} characters > {most}")
        fields = embed.get("fields") or []
        if len(fields) > EMBED_FIELDS:
            problems.append(f"embeds.{i}.fields: {len(fields)} > {EMBED_FIELDS}")
        for j, item in enumerate(fields):
            for key, most in FIELD_CHARS.items():
                if len(item.get(key) or "") > most:
                    problems.append(f"embeds.{i}.fields.{j}.{key}: > {most} characters")
        total += sum(len(embed.get(k) or "") for k in ("title", "description"))
        total += sum(len(f.get("name") or "") + len(f.get("value") or "") for f in fields)
        total += len((embed.get("footer") or {}).get("text") or "")
    if total > EMBED_TOTAL_CHARS:
        problems.append(f"embeds: {total} characters in all > {EMBED_TOTAL_CHARS}")
    if len(files) > FILES:
        problems.append(f"files: {len(files)} > {FILES}")
    problems += [
        f"files.{n}: {len(d)} bytes > {FILE_BYTES}" for n, d in files.items() if len(d) > FILE_BYTES
    ]
    return problems


def _user(user_id: int) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": f"user{user_id}",
        "discriminator": "0",
        "global_name": None,
        "avatar": None,
        "public_flags": 0,
    }


def _application() -> dict[str, Any]:
    return {
        "id": str(APP_ID),
        "name": "cluster-bot",
        "description": "",
        "icon": None,
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": {**BOT_USER, "id": "1", "username": "owner", "bot": False},
        "verify_key": "0" * 64,
        "flags": 0,
    }


def _json(data: Any, *, status: int = 200) -> web.Response:
    # Exactly this content type: discord.py parses nothing else as JSON.
    body = json.dumps(data).encode()
    return web.Response(body=body, status=status, headers={"Content-Type": "application/json"})


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"code": code, "message": message}, status=status)


async def _read_body(request: web.Request) -> tuple[Any, dict[str, bytes]]:
    if request.content_type.startswith("multipart/"):
        body: Any = {}
        files: dict[str, bytes] = {}
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if part.name == "payload_json":
                body = json.loads(await part.text())  # type: ignore[union-attr]
            elif part.filename:  # type: ignore[union-attr]
                files[part.filename] = bytes(await part.read())  # type: ignore[union-attr]
        return body, files
    raw = await request.read()
    return (json.loads(raw) if raw else {}), {}
