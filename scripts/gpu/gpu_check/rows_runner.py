"""Runs the rows. Each runs in a thread of its own with a time limit; the processes it started
are killed at that limit or at the check's deadline, whichever comes first. A row that raises or
hangs becomes a failed row and the others still run. Rows whose figures are timings (`quiet`)
run one at a time first, on an idle GPU; the others then run together."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gpu_check.outcome import SHOWN, Outcome, Row, RowResult, failed

T = TypeVar("T")
R = TypeVar("R")
GRACE_S = 5.0  # between SIGTERM (the CLI then kills its run's process tree) and SIGKILL


class RowStopped(Exception):
    """The row's time is up: it may start nothing more."""


@dataclass(frozen=True)
class Proc:
    argv: tuple[str, ...]
    returncode: int | None  # None: killed at its time limit
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def tail(self, chars: int = 3000) -> str:
        """The end of what it printed, stderr first: enough to see why it failed."""
        text = "\n".join(part for part in (self.stderr.strip(), self.stdout.strip()) if part)
        return text if len(text) <= chars else "…" + text[-chars:]

    def said(self) -> str:
        ended = f"exit {self.returncode}"
        if self.timed_out:
            ended = f"killed after {self.seconds:.0f} s"
        return f"$ {' '.join(self.argv)}\n({ended})\n{self.tail()}"


@dataclass
class Setting:
    """What every row reads: where things are, the machine's facts, the commands' environment."""

    root: Path  # the repository (its tests, the carried folder)
    work: Path  # this run's folder, readable by an ordinary user
    carry: Path  # what `make gpu-carry` filled
    examples: Path  # the installed package's example tasks
    env: Mapping[str, str]  # every command's environment
    facts: Mapping[str, Any]  # machine.Facts' fields
    gpu: str = "H100"  # the GPU type this machine is for `leaderboard check --gpu`
    out: Path | None = None  # files that come back with the run
    shared: dict[str, Any] = field(default_factory=dict)  # results a later row may reuse


class RowContext:
    """One row's view: its deadline, and commands run so that they die with it."""

    def __init__(self, name: str, setting: Setting, deadline: float) -> None:
        self.name = name
        self.setting = setting
        self.deadline = deadline
        self._procs: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float | None = None,
    ) -> Proc:
        """Runs `argv` to its end, or kills its process group at `timeout` or the row's end."""
        limit = min(timeout if timeout is not None else math.inf, self.left())
        began = time.monotonic()
        with self._lock:
            if self._stopped:
                raise RowStopped(self.name)
            proc = subprocess.Popen(
                list(argv),
                env=dict(env if env is not None else self.setting.env),
                cwd=cwd or self.setting.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,  # its own group: killed whole, children too
            )
            self._procs.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=limit)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _terminate(proc)
            stdout, stderr = proc.communicate()
            code = None
        finally:
            with self._lock:
                self._procs.discard(proc)
        return Proc(tuple(argv), code, stdout, stderr, time.monotonic() - began)

    def map(self, fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
        """`fn` over `items`, `workers` at a time, in their order (each may call `run`)."""
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(fn, items))

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            procs = list(self._procs)
        for proc in procs:
            _terminate(proc)


def _terminate(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=GRACE_S)
            if sig == signal.SIGTERM:  # what it left in its group goes too
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def run_rows(
    rows: Sequence[Row], setting: Setting, *, budget_s: float, progress: bool = True
) -> list[RowResult]:
    """Every row's result, in the rows' order: the quiet ones run first, one at a time."""
    end = time.monotonic() + budget_s
    done: dict[str, RowResult] = {}
    for row in (r for r in rows if r.quiet):
        done.update(_run_together([row], setting, end, progress))
    done.update(_run_together([r for r in rows if not r.quiet], setting, end, progress))
    return [done[r.name] for r in rows]


def _run_together(
    rows: Sequence[Row], setting: Setting, end: float, progress: bool
) -> dict[str, RowResult]:
    started = []
    results: dict[str, RowResult] = {}
    for row in rows:
        now = time.monotonic()
        if now >= end:
            results[row.name] = RowResult(
                row.name, row.title, failed("not run: the check's time ran out"), 0.0
            )
            continue
        ctx = RowContext(row.name, setting, min(now + row.limit_s, end))
        holder: list[tuple[Outcome, float]] = []
        thread = threading.Thread(target=_body, args=(row, ctx, holder), daemon=True)
        if progress:
            print(f"… {row.name}: {row.title}", file=sys.stderr, flush=True)
        thread.start()
        started.append((row, ctx, thread, holder, now))
    for row, ctx, thread, holder, began in started:
        thread.join(timeout=max(0.0, ctx.deadline - time.monotonic()))
        if thread.is_alive() or not holder:
            ctx.stop()
            why = "its limit" if ctx.deadline < end else "the check's deadline"
            outcome = failed(f"did not finish within {ctx.deadline - began:.0f} s ({why})")
            finished = time.monotonic()
        else:
            outcome, finished = holder[0]
        result = RowResult(row.name, row.title, outcome, finished - began)
        results[row.name] = result
        if progress:
            shown = SHOWN[outcome.status]
            print(f"{shown} {row.name} ({result.seconds:.0f} s)", file=sys.stderr, flush=True)
    return results


def _body(row: Row, ctx: RowContext, holder: list[tuple[Outcome, float]]) -> None:
    try:
        outcome = row.run(ctx)
    except RowStopped:
        return
    except Exception as exc:  # a broken row is a failed row, never a stopped check
        outcome = failed(f"error: {type(exc).__name__}: {exc}", traceback.format_exc())
    holder.append((outcome, time.monotonic()))
