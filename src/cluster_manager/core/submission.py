"""Checks a submitted file before anything runs it, and reads its `#!POPCORN` header lines."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from cluster_manager.core.models import Language
from cluster_manager.errors import InvalidSubmissionError

MAX_SUBMISSION_BYTES = 256 * 1024
ENTRY_POINT = "custom_kernel"
EXTENSIONS: dict[Language, tuple[str, ...]] = {
    Language.PYTHON: (".py",),
    Language.CUDA: (".cu", ".cuh", ".cpp", ".cc"),
}
_HEADER = re.compile(r"^\s*(?:#|//)!POPCORN\s+(\w+)\s+(\S+)\s*$")
_CUDA_ENTRY = re.compile(r"\bcustom_kernel\s*\(")


@dataclass(frozen=True)
class Submission:
    file_name: str
    code: str
    leaderboard: str | None = None  # from `#!POPCORN leaderboard NAME`
    gpu: str | None = None  # from `#!POPCORN gpu NAME`


def parse_headers(code: str) -> dict[str, str]:
    """`#!POPCORN key value` lines (`//!POPCORN` in CUDA); the first of each key wins."""
    headers: dict[str, str] = {}
    for line in code.splitlines():
        match = _HEADER.match(line)
        if match:
            headers.setdefault(match[1].lower(), match[2])
    return headers


def _python_entry_point(code: str, file_name: str) -> None:
    try:
        tree = ast.parse(code, filename=file_name)
    except SyntaxError as exc:
        raise InvalidSubmissionError(
            f"{file_name}: line {exc.lineno}: invalid Python syntax ({exc.msg})"
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        reason = str(exc) or f"{type(exc).__name__}: nested too deeply?"
        raise InvalidSubmissionError(f"{file_name}: cannot be parsed ({reason})") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == ENTRY_POINT:
            return
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == ENTRY_POINT for t in targets):
                return
        if isinstance(node, ast.Import | ast.ImportFrom) and any(
            (a.asname or a.name) == ENTRY_POINT for a in node.names
        ):
            return
    raise InvalidSubmissionError(f"{file_name}: no top-level `def {ENTRY_POINT}(data)` found")


def validate_submission(
    file_name: str, data: bytes, lang: Language, *, max_bytes: int = MAX_SUBMISSION_BYTES
) -> Submission:
    """Size, extension, encoding and entry point; each problem gets its own message."""
    name = PurePosixPath(file_name.replace("\\", "/")).name
    if not data:
        raise InvalidSubmissionError(f"{name}: the file is empty")
    if len(data) > max_bytes:
        raise InvalidSubmissionError(
            f"{name}: {len(data)} bytes is over the limit of {max_bytes} bytes"
        )
    allowed = EXTENSIONS[lang]
    if PurePosixPath(name).suffix.lower() not in allowed:
        raise InvalidSubmissionError(
            f"{name}: this task takes {' or '.join(allowed)} files ({lang.value} task)"
        )
    if b"\x00" in data:
        raise InvalidSubmissionError(f"{name}: binary file (contains NUL bytes)")
    try:
        code = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSubmissionError(f"{name}: not UTF-8 text (byte {exc.start})") from None
    if lang is Language.PYTHON:
        _python_entry_point(code, name)
    elif not _CUDA_ENTRY.search(code):
        raise InvalidSubmissionError(f"{name}: no `{ENTRY_POINT}(...)` definition found")
    headers = parse_headers(code)
    return Submission(name, code, headers.get("leaderboard"), headers.get("gpu"))
