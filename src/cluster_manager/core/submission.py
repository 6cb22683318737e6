"""Checks a submitted file before anything runs it, and reads its `#!POPCORN` header lines."""

from __future__ import annotations

import ast
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cluster_manager.core.errors import InvalidSubmissionError
from cluster_manager.core.models import Language
from cluster_manager.core.names import hidden_problem

MAX_SUBMISSION_BYTES = 256 * 1024
UTF8_BOM = b"\xef\xbb\xbf"


def format_size(size: int) -> str:
    """A file size as people write it: `512 bytes`, `256 KiB`, `300.5 KiB`, `1.2 MiB`."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if size % scale == 0 else f"{value:.1f} {unit}"
    return f"{size} byte" + ("" if size == 1 else "s")


def too_large(name: str, size: int | None, limit: int, what: str = "a submission") -> str:
    """The size refusal: the file's own size where known, and the limit for `what` it is,
    both readable (`crash.py is 300 KiB, over the 256 KiB limit for a submission`)."""
    own = "" if size is None else f" is {_over(size, limit)},"
    return f"{name}{own} over the {format_size(limit)} limit for {what}"


def _over(size: int, limit: int) -> str:
    """`size`, never shown as the limit itself: a byte over 256 KiB reads `256 KiB and 1
    byte`, not `256.0 KiB`."""
    shown, cap = format_size(size), format_size(limit)
    if size > limit and shown in (cap, cap.replace(" ", ".0 ")):
        return f"{cap} and {format_size(size - limit)}"
    return shown


def in_own_names(text: str, file_name: str, slot: str | None = None) -> str:
    """A report as its author reads it: the runner runs the code under the task's name for it
    (`slot`; `submission` with the file's extension where not known, as every task here and
    popcorn's name it), so its errors say `submission.py` of a file the user called
    `crash.py`. Each mention of the slot names the user's own file instead."""
    slot = slot or "submission" + PurePosixPath(file_name).suffix
    if not file_name or slot == file_name:
        return text
    return re.sub(rf"(?<![\w.-]){re.escape(slot)}\b", lambda _m: file_name, text)


def decode_source(name: str, data: bytes) -> str:
    """UTF-8 text; a byte-order mark (what some Windows editors write first) is dropped."""
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSubmissionError(f"{name}: not UTF-8 text (byte {exc.start})") from None


def read_source_file(path: Path, limit: int = MAX_SUBMISSION_BYTES) -> bytes:
    """A user's file, refused before it is read whole when it is not a regular file (a FIFO,
    /dev/zero) or longer than `limit`: at most `limit + 1` bytes are ever read."""
    try:
        # Non-blocking: opening a FIFO would otherwise wait for a writer before we can look.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise InvalidSubmissionError(f"{path}: not a regular file")
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InvalidSubmissionError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InvalidSubmissionError(too_large(str(path), max(size, len(data)), limit))
    return data


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
    if problem := hidden_problem(name):
        raise InvalidSubmissionError(f"{name!a}: the file name {problem}")
    if not data:
        raise InvalidSubmissionError(f"{name}: the file is empty")
    if len(data) > max_bytes:
        raise InvalidSubmissionError(too_large(name, len(data), max_bytes))
    allowed = EXTENSIONS[lang]
    if PurePosixPath(name).suffix.lower() not in allowed:
        raise InvalidSubmissionError(
            f"{name}: this task takes {' or '.join(allowed)} files ({lang.value} task)"
        )
    if b"\x00" in data:
        raise InvalidSubmissionError(f"{name}: binary file (contains NUL bytes)")
    code = decode_source(name, data)
    if lang is Language.PYTHON:
        _python_entry_point(code, name)
    elif not _CUDA_ENTRY.search(code):
        raise InvalidSubmissionError(f"{name}: no `{ENTRY_POINT}(...)` definition found")
    headers = parse_headers(code)
    return Submission(name, code, headers.get("leaderboard"), headers.get("gpu"))
