"""Logging of the long-running commands (serve, bot, worker): one handler on stderr, UTC
timestamps, text lines or one JSON object per line, secrets scrubbed from every record."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TextIO
from urllib.parse import urlsplit

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from cluster_manager.settings import Settings

HANDLER_NAME = "cluster-manager"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JSON_FIELDS = ("asctime", "levelname", "name", "message")
JSON_NAMES = {"asctime": "time", "levelname": "level", "name": "logger", "exc_info": "exception"}
# Chatty at INFO (a line per HTTP request, per gateway heartbeat): shown from WARNING on,
# unless DEBUG is asked for.
QUIET_LOGGERS = (
    "asyncio",
    "httpx",
    "httpcore",
    "discord.gateway",
    "discord.http",
    "discord.state",
    "discord.webhook",
    "websockets",
    "python_multipart",
    # The embedded Postgres logs each command line it runs, over several lines; yoyo each
    # step of each migration (`db migrate` says which it applied).
    "pgserver",
    "yoyo",
)

# Interaction and webhook tokens travel in URLs; discord.py logs routes at debug level.
_URL_TOKENS = re.compile(r"(/(?:interactions|webhooks)/\d+/)[\w.\-]+")
# API tokens (service.accounts) travel in /token's reply, which discord.py logs at debug level.
_API_TOKENS = re.compile(r"\bcm_[\w\-]{20,}")


class RedactingFilter(logging.Filter):
    """Replaces the given secrets, API tokens and Discord URL tokens in a record's message and
    traceback: whatever a library or an exception says, they never reach a log line."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        text = _API_TOKENS.sub("cm_[redacted]", text)
        return _URL_TOKENS.sub(r"\1[redacted]", text)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.redact(record.getMessage()), None
        if record.exc_info:
            # Formatters print `exc_text` when there is no `exc_info`: the redacted trace.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def utc_time(record: logging.LogRecord) -> str:
    """The record's time in ISO 8601, UTC, to the millisecond."""
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record)


class JsonLineFormatter(JsonFormatter):
    def __init__(self) -> None:
        super().__init__(
            list(JSON_FIELDS),
            rename_fields=JSON_NAMES,
            # uvicorn repeats each message with terminal colours for its own handlers.
            reserved_attrs=[*RESERVED_ATTRS, "color_message"],
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record)


def secrets_of(settings: Settings) -> list[str]:
    """What the settings hold that no log line may show."""
    found = [settings.admin_token, settings.api_token, settings.payload_key]
    found += settings.github_tokens
    if settings.database_url:
        found.append(urlsplit(settings.database_url).password)
    return [s for s in found if s]


def configure_logging(
    settings: Settings,
    *,
    secrets: Iterable[str] = (),
    level: int | None = None,
    stream: TextIO | None = None,
) -> None:
    """Sends every logger's records (uvicorn's and discord.py's too) through one handler on
    `stream` (stderr) at the settings' level, or `level` when given. Called again, it
    replaces its own handler and leaves others' (pytest's) alone."""
    level = settings.log_level if level is None else level
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(HANDLER_NAME)
    formatter = JsonLineFormatter() if settings.log_format == "json" else TextFormatter()
    handler.setFormatter(formatter)
    handler.addFilter(RedactingFilter([*secrets, *secrets_of(settings)]))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    quiet = level if level <= logging.DEBUG else max(level, logging.WARNING)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
