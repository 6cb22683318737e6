"""A run request as a compact text: JSON, zlib-compressed, then base64-encoded or sealed.

This is how a request travels through channels that take only text (GitHub's workflow
dispatch inputs, a Slurm batch script, a Modal call). With a key (core.sealed) the compressed
request is sealed instead of merely encoded, and so is the result that comes back: GitHub shows
dispatch inputs and artifacts to everyone who can read the runner repository.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib

from cluster_manager.core.models import RunRequest
from cluster_manager.core.sealed import KEY_ENV, SealError, is_sealed, open_sealed, seal

# GitHub refuses workflow_dispatch inputs longer than this (all inputs together).
GITHUB_INPUTS_LIMIT = 65_535
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
PAYLOAD_CONTEXT = "payload"
RESULT_CONTEXT = "result"


class PayloadError(ValueError):
    pass


def encode_payload(request: RunRequest, key: bytes | str | None = None) -> str:
    """The request as text; sealed with `key` when one is given."""
    raw = json.dumps(request.to_json(), separators=(",", ":")).encode("utf-8")
    compressed = zlib.compress(raw, 9)
    if key is not None:
        return seal(compressed, key, context=PAYLOAD_CONTEXT)
    return base64.b64encode(compressed).decode("ascii")


def decode_payload(text: str, key: bytes | str | None = None) -> RunRequest:
    """The request from `encode_payload`'s text. Sealed text needs its key (a SealError
    naming CLUSTER_MANAGER_PAYLOAD_KEY otherwise); plain text is read with or without one."""
    if is_sealed(text):
        compressed = open_sealed(text, key, context=PAYLOAD_CONTEXT)
    else:
        compressed = _unbase64(text)
    return _inflate(compressed)


def open_payload(text: str, key: bytes | None) -> tuple[RunRequest, bytes | None]:
    """For the runner: the request, and the key to seal its result with. A result is sealed
    exactly when its request came sealed, so a key that strays into the environment of a
    runner fed plain requests (the local launcher's) does not seal what its launcher reads."""
    request = decode_payload(text, key)
    return request, (key if is_sealed(text) else None)


def seal_result(json_text: str, key: bytes | str | None) -> str:
    """What the runner writes as its result: sealed when it has a key for it."""
    if key is None:
        return json_text
    return seal(json_text.encode("utf-8"), key, context=RESULT_CONTEXT)


def open_result(text: str, key: bytes | str | None) -> str:
    """The result's JSON text. With a key the result must be sealed with it: a plain one was
    not written by a runner holding the key."""
    if key is None:
        return text
    if not is_sealed(text):
        raise SealError(
            f"the result is not sealed with {KEY_ENV}, so no runner holding the key wrote it "
            "(a runner of an older version, or a forged artifact)"
        )
    try:
        return open_sealed(text, key, context=RESULT_CONTEXT).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SealError(f"the sealed result is not UTF-8 text: {exc}") from None


def _unbase64(text: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PayloadError(f"unreadable payload: {exc}") from exc


def _inflate(compressed: bytes) -> RunRequest:
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(compressed, MAX_DECOMPRESSED_BYTES)
        if inflater.unconsumed_tail:
            raise PayloadError(f"payload inflates to more than {MAX_DECOMPRESSED_BYTES} bytes")
        return RunRequest.from_json(json.loads(raw))
    except (zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(f"unreadable payload: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PayloadError):
            raise
        raise PayloadError(f"invalid run request in payload: {exc}") from exc
