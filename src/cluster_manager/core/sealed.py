"""Sealed text: AES-256-GCM with a shared key, for what crosses a channel others can read.

GitHub shows a workflow run's dispatch inputs and its artifacts to everyone who can read the
runner repository; the run request (submission, secret seed) and the result travel sealed, with
the key in the repository secret and in the bot's settings, both named `KEY_ENV`.

    cm-sealed-v1:<context>:<base64url(nonce ‖ ciphertext ‖ tag)>

The version and the context word ("payload", "result") are bound into the tag as associated
data: a sealed payload is not accepted as a result, and a change of scheme is an error, not
garbage. `cryptography` is imported only when something is sealed or opened, so runners that
never see sealed text need not have it.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import MutableMapping

KEY_ENV = "CLUSTER_MANAGER_PAYLOAD_KEY"
MARK = "cm-sealed-"  # of every version
PREFIX = f"{MARK}v1:"
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
_SEALED = re.compile(rf"{re.escape(PREFIX)}(?P<context>[a-z]+):(?P<body>[A-Za-z0-9_=-]*)")
KEY_HELP = (
    f"{KEY_ENV} must be 32 random bytes in base64, e.g. from "
    "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
)


class SealError(ValueError):
    """Sealed text that cannot be opened, or a key that cannot be used. Names `KEY_ENV`."""


def generate_key() -> str:
    """A fresh key, as it goes into the setting and the repository secret."""
    return secrets.token_urlsafe(KEY_BYTES)


def parse_key(text: str) -> bytes:
    """The key's bytes from its base64 text (URL-safe or standard, padding optional)."""
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    try:
        key = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SealError(f"{KEY_ENV} is not base64: {KEY_HELP}") from None
    if len(key) != KEY_BYTES:
        raise SealError(f"{KEY_ENV} holds {len(key)} bytes, not {KEY_BYTES}: {KEY_HELP}")
    return key


def take_payload_key(environ: MutableMapping[str, str] | None = None) -> bytes | None:
    """Removes `KEY_ENV` from the environment (no child process may inherit it) and returns
    the key, or None when it is unset or empty. A malformed key is a SealError, raised only
    after the variable is gone."""
    env = os.environ if environ is None else environ
    raw = env.pop(KEY_ENV, None)
    return parse_key(raw) if raw and raw.strip() else None


def is_sealed(text: str) -> bool:
    """Whether `text` is sealed, in this version of the scheme or another."""
    return text.lstrip().startswith(MARK)


def seal(data: bytes, key: bytes | str, *, context: str = "data") -> str:
    """`data` encrypted and authenticated with `key`, as text with the version prefix.
    `context` (lowercase letters) says what it is; `open_sealed` must be given the same."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not re.fullmatch(r"[a-z]+", context):
        raise ValueError(f"a seal's context is lowercase letters, not {context!r}")
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(as_key(key)).encrypt(nonce, data, _associated(context))
    body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii")
    return f"{PREFIX}{context}:{body}"


def open_sealed(text: str, key: bytes | str | None, *, context: str = "data") -> bytes:
    """The bytes `seal` was given. A missing or wrong key, altered text or another context
    is a SealError."""
    found = _SEALED.fullmatch(text.strip())
    if found is None:
        if is_sealed(text) and not text.lstrip().startswith(PREFIX):
            raise SealError(f"the {context} is sealed in a version other than {PREFIX!r}")
        raise SealError(f"the {context} is not sealed text ({PREFIX}{context}:… expected)")
    if found["context"] != context:
        raise SealError(f"a sealed {found['context']} was given where a {context} belongs")
    if key is None:
        raise SealError(
            f"the {context} is sealed, but {KEY_ENV} is not set (on a runner: the repository "
            "secret of that name, passed to the runner step)"
        )
    blob = _unbase64(found["body"], context)
    if len(blob) < NONCE_BYTES + TAG_BYTES:
        raise SealError(f"the sealed {context} is truncated")
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce, sealed = blob[:NONCE_BYTES], blob[NONCE_BYTES:]
    try:
        return AESGCM(as_key(key)).decrypt(nonce, sealed, _associated(context))
    except InvalidTag:
        raise SealError(
            f"the {context} was sealed with another {KEY_ENV}, or altered since: the bot's "
            "setting and the runner repository's secret must hold the same key"
        ) from None


def as_key(key: bytes | str) -> bytes:
    """The key's bytes from its text or its bytes, checked."""
    if isinstance(key, str):
        return parse_key(key)
    if len(key) != KEY_BYTES:
        raise SealError(f"{KEY_ENV} holds {len(key)} bytes, not {KEY_BYTES}: {KEY_HELP}")
    return key


def _associated(context: str) -> bytes:
    return f"{PREFIX}{context}:".encode()


def _unbase64(text: str, context: str) -> bytes:
    try:
        return base64.b64decode(text, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise SealError(f"the sealed {context} is not valid base64") from None
