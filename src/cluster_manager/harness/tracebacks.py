"""A submission's exception as its author should read it: the frames of their code and of the
libraries it called, with paths as they import them; never the platform's frames or where
anything is installed on the machine that ran it."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import cluster_manager

PLATFORM_DIR = str(Path(cluster_manager.__file__).resolve().parent) + os.sep


def user_traceback(exc: BaseException) -> str:
    """`exc`'s traceback (with its causes) without the platform's frames, each file named
    relative to the import path it came from (`submission.py`, `torch/nn/functional.py`)."""
    report = traceback.TracebackException.from_exception(exc)
    roots = sorted({_folder(p) for p in sys.path if p}, key=len, reverse=True)
    _strip(report, roots, seen=set())
    return "".join(report.format())


def _strip(report: traceback.TracebackException, roots: list[str], seen: set[int]) -> None:
    if id(report) in seen:  # chains can loop back on themselves
        return
    seen.add(id(report))
    kept = [f for f in report.stack if not _resolved(f.filename).startswith(PLATFORM_DIR)]
    for frame in kept:
        frame.filename = _relative(frame.filename, roots)
    report.stack = traceback.StackSummary.from_list(kept)
    for chained in (report.__cause__, report.__context__, *(report.exceptions or ())):
        if chained is not None:
            _strip(chained, roots, seen)


def _relative(filename: str, roots: list[str]) -> str:
    resolved = _resolved(filename)
    for root in roots:
        if resolved.startswith(root):
            return resolved[len(root) :]
    return Path(filename).name


def _folder(path: str) -> str:
    return _resolved(str(Path.cwd() / path)) + os.sep  # an absolute `path` stays itself


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve())
    except (OSError, ValueError, RuntimeError):
        return filename
