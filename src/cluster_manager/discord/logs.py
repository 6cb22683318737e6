"""Logging for the bot process, with secrets scrubbed from every record."""

from __future__ import annotations

import logging
import re

import discord

# Interaction and webhook tokens travel in URLs; discord.py logs routes at debug level.
_URL_TOKENS = re.compile(r"(/(?:interactions|webhooks)/\d+/)[\w.\-]+")
# API tokens (service.accounts) travel in /token's reply, which discord.py logs at debug level.
_API_TOKENS = re.compile(r"\bcm_[\w\-]{20,}")


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        text = _API_TOKENS.sub("cm_[redacted]", text)
        return _URL_TOKENS.sub(r"\1[redacted]", text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info:
            # Formatters render tracebacks their own way: fold it into the message instead.
            trace = logging.Formatter().formatException(record.exc_info)
            message = f"{message}\n{trace}"
            record.exc_info, record.exc_text = None, None
        record.msg, record.args = self.redact(message), None
        return True


def setup_logging(*, debug: bool, secrets: list[str]) -> None:
    discord.utils.setup_logging(level=logging.DEBUG if debug else logging.INFO, root=True)
    redactor = RedactingFilter(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redactor)
