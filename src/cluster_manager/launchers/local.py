"""Runs requests on this machine: the runner entrypoint in a child process per run.

Each run lives in its own directory (progress log, result), named by its external id, so a run
started before a restart can be re-attached and its result read once it is written. The request
(with its secret seed) reaches the runner on its stdin only: no copy on disk, none in a command
line.

Once the run's result is stored (`release`), its directory goes: at once, or after `keep_s` for
debugging (a `released` mark dates it; older ones go on the launcher's start and at every later
release). A directory never released (its job given up, its server killed before it stored
the result) stays a day, as Slurm's do, for a restarted server to take its job over. A run
whose runner is still at work keeps its directory whatever its age.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.progress import ProgressEvent, parse_events
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, RunHandle, RunState

RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.jsonl"
PID_FILE = "pid"
RELEASED_FILE = "released"
# How long a directory whose result was never stored is kept (launchers.slurm's STALE_RUN_S).
UNRELEASED_KEEP_S = 24 * 3600.0


class LocalLauncher(Launcher):
    name = "local"

    def __init__(
        self,
        runs_dir: Path,
        *,
        poll_interval: float = 0.1,
        sandbox: bool = True,
        keep_s: float = 0.0,
    ) -> None:
        self.runs_dir = runs_dir
        self.poll_interval = poll_interval
        # Off only for a developer's own code (`cluster-manager eval`): it then runs as them.
        self.sandbox = sandbox
        # How long a released run's directory stays (0: removed on release).
        self.keep_s = keep_s
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self.prune()

    def _dir(self, external_id: str) -> Path:
        if not external_id or "/" in external_id or external_id.startswith("."):
            raise LauncherError(f"invalid local run id {external_id!r}")
        return self.runs_dir / external_id

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        external_id = key
        run_dir = self._dir(external_id)
        if run_dir.exists() and self._state(external_id) is not RunState.LOST:
            return RunHandle(self.name, external_id)  # already dispatched under this key
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True, mode=0o700)
        progress = (run_dir / PROGRESS_FILE).open("wb")
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "cluster_manager.harness.runner",
                "--request",
                "-",
                "--output",
                str(run_dir / RESULT_FILE),
                "--progress",
                *([] if self.sandbox else ["--no-sandbox"]),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=progress,
                start_new_session=True,
                env=runner_env(os.environ, gpu),
            )
        except OSError as exc:
            raise LauncherError(f"cannot start the runner: {exc}") from exc
        finally:
            progress.close()
        (run_dir / PID_FILE).write_text(str(proc.pid))
        self._procs[external_id] = proc
        await _send_request(proc, request)
        return RunHandle(self.name, external_id)

    def _state(self, external_id: str) -> RunState:
        run_dir = self._dir(external_id)
        if (run_dir / RESULT_FILE).is_file():
            proc = self._procs.get(external_id)
            # The runner writes the file before it exits; wait for the exit to read it whole.
            if proc is None or proc.returncode is not None:
                return RunState.FINISHED
            return RunState.RUNNING
        proc = self._procs.get(external_id)
        if proc is not None:
            return RunState.RUNNING if proc.returncode is None else RunState.LOST
        return RunState.RUNNING if _alive(run_dir) else RunState.LOST

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        return {h.external_id: self._state(h.external_id) for h in handles}

    async def result(self, handle: RunHandle) -> RunResult:
        path = self._dir(handle.external_id) / RESULT_FILE
        try:
            return RunResult.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LauncherError(f"run {handle.external_id}: unreadable result ({exc})") from exc

    async def progress(self, handle: RunHandle) -> list[ProgressEvent]:
        return await asyncio.to_thread(self._read_progress, handle.external_id)

    def _read_progress(self, external_id: str) -> list[ProgressEvent]:
        try:
            text = (self._dir(external_id) / PROGRESS_FILE).read_text("utf-8", errors="replace")
        except OSError:
            return []
        return parse_events(text)

    async def cancel(self, handle: RunHandle) -> None:
        """SIGTERM lets the runner kill the whole tree it started; SIGKILL if it lingers."""
        run_dir = self._dir(handle.external_id)
        proc = self._procs.get(handle.external_id)
        if proc is None and not _alive(run_dir):
            return
        pid = proc.pid if proc is not None else _pid(run_dir)
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if (proc is not None and proc.returncode is not None) or not _alive(run_dir):
                break
            await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if proc is not None:
            await proc.wait()

    async def release(self, handle: RunHandle) -> None:
        """The result is stored: the directory goes now, or is marked released to go after
        `keep_s`; a runner still at work keeps it (it is not this run's end)."""
        external_id = handle.external_id
        if self._running(external_id):
            return
        self._procs.pop(external_id, None)
        run_dir = self._dir(external_id)
        if self.keep_s <= 0:
            await asyncio.to_thread(_remove, run_dir)
        elif run_dir.is_dir():
            (run_dir / RELEASED_FILE).touch()
        await asyncio.to_thread(self.prune)

    def prune(self) -> list[str]:
        """Removes the directories released over `keep_s` ago and those never released and
        untouched for `UNRELEASED_KEEP_S` (or `keep_s`, if longer), except where a runner is
        at work; returns their names. A directory that cannot be read is left as it is."""
        now = time.time()
        removed = []
        try:
            entries = [e for e in self.runs_dir.iterdir() if e.is_dir()]
        except OSError:
            return []
        for entry in entries:
            if entry.name.startswith(".") or self._running(entry.name):
                continue
            released = _mtime(entry / RELEASED_FILE)
            if released is not None:
                expired = now - released >= self.keep_s
            else:
                touched = _last_touched(entry)
                keep = max(self.keep_s, UNRELEASED_KEEP_S)
                expired = touched is not None and now - touched >= keep
            if expired:
                _remove(entry)
                removed.append(entry.name)
        return removed

    def _running(self, external_id: str) -> bool:
        """Whether the runner still works on the run: alive, its result not yet written. (It
        writes the result last, so one still exiting, as a re-attached runner often is when
        its result is stored, is done.)"""
        run_dir = self._dir(external_id)
        if (run_dir / RESULT_FILE).is_file():
            return False
        proc = self._procs.get(external_id)
        if proc is not None:
            return proc.returncode is None
        return _alive(run_dir)

    async def wait(self, handle: RunHandle) -> None:
        """Waits for a run started by this process to exit (cheaper than polling)."""
        proc = self._procs.get(handle.external_id)
        if proc is not None:
            await proc.wait()


async def _send_request(proc: asyncio.subprocess.Process, request: RunRequest) -> None:
    """A runner that died before reading it shows up as LOST, like any other early death."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(json.dumps(request.to_json()).encode())
        await proc.stdin.drain()
    proc.stdin.close()


def _pid(run_dir: Path) -> int | None:
    try:
        return int((run_dir / PID_FILE).read_text())
    except (OSError, ValueError):
        return None


def runner_env(environ: Mapping[str, str], gpu: GpuType | None) -> dict[str, str]:
    """The runner's environment: ours, and unless the operator chose otherwise, a share of
    this machine's cores for the task's threads (torch's intra-op pool), one slot of the GPU
    type's `max_concurrent` each. A kernel whose threads outnumber the cores left to it waits
    for a core at every parallel region, a wait that belongs to the other jobs, not to it."""
    env = dict(environ)
    if gpu is not None and "OMP_NUM_THREADS" not in env:
        cores = len(os.sched_getaffinity(0))
        env["OMP_NUM_THREADS"] = str(max(1, cores // max(gpu.max_concurrent, 1)))
    return env


def _remove(run_dir: Path) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _last_touched(run_dir: Path) -> float | None:
    """When the directory or a file in it last changed (None: it cannot be read)."""
    try:
        paths = [run_dir, *run_dir.iterdir()]
    except OSError:
        return None
    return max((t for t in map(_mtime, paths) if t is not None), default=None)


def _alive(run_dir: Path) -> bool:
    """Is the runner of this directory still alive? Checks the command line: pids get reused."""
    pid = _pid(run_dir)
    if pid is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(run_dir / RESULT_FILE).encode() in cmdline
