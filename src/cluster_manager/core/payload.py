"""A run request as a compact text: JSON, zlib-compressed, base64-encoded.

This is how a request travels through channels that take only text (GitHub's workflow
dispatch inputs, a Slurm batch script, a Modal call).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib

from cluster_manager.core.models import RunRequest

# GitHub refuses workflow_dispatch inputs longer than this (all inputs together).
GITHUB_INPUTS_LIMIT = 65_535
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024


class PayloadError(ValueError):
    pass


def encode_payload(request: RunRequest) -> str:
    raw = json.dumps(request.to_json(), separators=(",", ":")).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def decode_payload(text: str) -> RunRequest:
    try:
        compressed = base64.b64decode(text.strip(), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(compressed, MAX_DECOMPRESSED_BYTES)
        if inflater.unconsumed_tail:
            raise PayloadError(f"payload inflates to more than {MAX_DECOMPRESSED_BYTES} bytes")
        return RunRequest.from_json(json.loads(raw))
    except (binascii.Error, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(f"unreadable payload: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PayloadError):
            raise
        raise PayloadError(f"invalid run request in payload: {exc}") from exc
