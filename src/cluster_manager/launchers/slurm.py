"""Runs requests as Slurm batch jobs: `sbatch` to start, one `squeue` for many states, `scancel`.

The shared directory must be visible at the same path on this host and on the compute nodes:

    <shared>/<key>/payload.txt      the request as a payload (core.payload), read by the runner
    <shared>/<key>/job.sh           the batch script
    <shared>/<key>/slurm_job_id     written as soon as sbatch answers
    <shared>/<key>/progress.jsonl   the runner's progress events (its stderr)
    <shared>/<key>/result.json      the RunResult, moved into place once the runner has exited
    <shared>/<key>/slurm.out        what Slurm captured of the job's output
    <shared>/by-id/<job id>         a symlink to ../<key>: a job id finds its run directory

The external id is the Slurm job id. `attach` also takes the dispatch key (what the scheduler
records before dispatching) and resolves it through `<key>/slurm_job_id`.

States come from `squeue --states=all`, which also lists jobs that ended less than `MinJobAge`
seconds ago; the result file tells a finished run from a lost one. Jobs that slurmctld has
already forgotten are decided by the result file and, if the cluster keeps accounting (slurmdbd),
by one `sacct` call for those without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cluster_manager.core.models import RunRequest, RunResult
from cluster_manager.core.payload import encode_payload
from cluster_manager.core.plan import run_timeout
from cluster_manager.core.progress import ProgressEvent, parse_events
from cluster_manager.errors import LauncherError
from cluster_manager.gpus import GpuType
from cluster_manager.launchers.base import Launcher, RunHandle, RunState

log = logging.getLogger(__name__)

PAYLOAD_FILE = "payload.txt"
SCRIPT_FILE = "job.sh"
JOB_ID_FILE = "slurm_job_id"
PROGRESS_FILE = "progress.jsonl"
RESULT_FILE = "result.json"
PARTIAL_RESULT_FILE = "result.json.part"
OUTPUT_FILE = "slurm.out"
BY_ID_DIR = "by-id"
JOB_NAME_PREFIX = "cm-"

MAX_RESULT_BYTES = 64 * 1024 * 1024
MAX_PROGRESS_BYTES = 4 * 1024 * 1024
# A run directory untouched this long, whose job is neither queued nor running, is left over.
STALE_RUN_S = 24 * 3600.0
SWEEP_EVERY_S = 3600.0

# Registry parameter -> sbatch option. A parameter left out (or empty) is not passed at all,
# so a GPU type without `gres` asks for no generic resource.
SBATCH_PARAMS = {
    "partition": "--partition",
    "account": "--account",
    "gres": "--gres",
    "cpus_per_task": "--cpus-per-task",
    "mem": "--mem",
}

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_JOB_ID = re.compile(r"[0-9]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_QUEUED = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
)
_RUNNING = frozenset(
    {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
)
# scancel/squeue answers that mean "this job is over", not "the command failed".
_GONE_MESSAGES = ("invalid job id", "already completing or completed")


@dataclass(frozen=True)
class _Output:
    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class _QueuedJob:
    state: str
    name: str


class SlurmLauncher(Launcher):
    name = "slurm"
    command_timeout: float = 30.0  # seconds for one sbatch/squeue/sacct/scancel call

    def __init__(
        self,
        shared_dir: Path,
        *,
        python: str = sys.executable,
        poll_interval: float = 2.0,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.shared_dir = shared_dir.absolute()  # sbatch --chdir needs an absolute path
        self.python = python
        self.poll_interval = poll_interval
        self.extra_env = dict(extra_env or {})
        for name in self.extra_env:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"invalid environment variable name {name!r}")
        self._accounting: bool | None = None  # unknown until sacct answers once
        self._last_sweep: float | None = None

    # --- submit --------------------------------------------------------------------------

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        run_dir = self._key_dir(key)
        await self._sweep_now_and_then()
        existing = await self._adopt(run_dir)
        if existing is not None:
            return RunHandle(self.name, existing)  # already dispatched under this key
        command = sbatch_command(request, key, gpu, run_dir)  # bad parameters fail early
        await asyncio.to_thread(self._prepare, run_dir, request, key)
        job_id = _parse_sbatch(await self._check(command))
        await asyncio.to_thread(self._record, run_dir, job_id)
        return RunHandle(self.name, job_id)

    async def _adopt(self, run_dir: Path) -> str | None:
        """A job submitted earlier under this key that is not lost, if there is one."""
        if not await asyncio.to_thread(run_dir.is_dir):
            return None
        recorded = await asyncio.to_thread(_read_job_id, run_dir)
        # No id on file: sbatch may have answered just before the submitting process died.
        candidates = [recorded] if recorded else await self._jobs_named(job_name(run_dir.name))
        for job_id in candidates:
            if job_id != recorded:
                await asyncio.to_thread(self._record, run_dir, job_id)
            if (await self.states([RunHandle(self.name, job_id)]))[job_id] is not RunState.LOST:
                return job_id
        return None

    def _prepare(self, run_dir: Path, request: RunRequest, key: str) -> None:
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for stale in (JOB_ID_FILE, RESULT_FILE, PARTIAL_RESULT_FILE, PROGRESS_FILE, OUTPUT_FILE):
            (run_dir / stale).unlink(missing_ok=True)
        # It holds the secret seed: readable by this user alone (the sandbox runs as another).
        payload = run_dir / PAYLOAD_FILE
        payload.unlink(missing_ok=True)
        fd = os.open(payload, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(encode_payload(request))
        script = run_dir / SCRIPT_FILE
        script.write_text(batch_script(key, run_dir, self.python, self.extra_env), "utf-8")
        script.chmod(0o700)

    def _record(self, run_dir: Path, job_id: str) -> None:
        """Writes the job id next to the run, then points by-id/<job id> at the run."""
        _replace_text(run_dir / JOB_ID_FILE, job_id)
        by_id = self.shared_dir / BY_ID_DIR
        by_id.mkdir(parents=True, exist_ok=True)
        # Replaced, not kept: a job id reused after a controller reset must find the new run.
        tmp = by_id / f".{job_id}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(Path("..") / run_dir.name)
        tmp.replace(by_id / job_id)

    # --- states --------------------------------------------------------------------------

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        # The shared directory may be a slow network file system: never on the event loop.
        runs = await asyncio.to_thread(self._survey, [h.external_id for h in handles])
        located = {ext: run for ext, run in runs.items() if run is not None}
        queue = await self._squeue(sorted({job_id for job_id, _, _ in located.values()}))
        states = dict.fromkeys(runs, RunState.LOST)  # no run directory: nothing to wait for
        forgotten: dict[str, tuple[str, Path]] = {}
        for external_id, (job_id, run_dir, has_result) in located.items():
            state = _queue_state(queue.get(job_id), run_dir, has_result)
            if state is None:
                forgotten[external_id] = (job_id, run_dir)
            else:
                states[external_id] = state
        if forgotten:
            states.update(await self._accounted_states(forgotten))
        return states

    def _survey(self, external_ids: Sequence[str]) -> dict[str, tuple[str, Path, bool] | None]:
        """Job id, run directory and whether its result is there, per external id."""
        found: dict[str, tuple[str, Path, bool] | None] = {}
        for external_id in external_ids:
            run = self._locate(external_id)
            found[external_id] = None if run is None else (*run, (run[1] / RESULT_FILE).is_file())
        return found

    async def _accounted_states(
        self, forgotten: Mapping[str, tuple[str, Path]]
    ) -> dict[str, RunState]:
        """Runs slurmctld no longer knows and without a result: lost, unless accounting
        says otherwise."""
        accounted = await self._sacct(sorted({job_id for job_id, _ in forgotten.values()}))
        states = {}
        for external_id, (job_id, run_dir) in forgotten.items():
            known = accounted.get((job_id, job_name(run_dir.name)))
            states[external_id] = (
                RunState.LOST
                if known is None
                else slurm_state(known, has_result=False, settled=True)
            )
        return states

    async def _squeue(self, job_ids: Sequence[str]) -> dict[str, _QueuedJob]:
        """One call for all ids; ended jobs are listed too until slurmctld purges them."""
        if not job_ids:
            return {}
        out = await self._run(
            ["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", "%i|%T|%j"]
        )
        # squeue fails, rather than printing nothing, when its only id is unknown.
        if out.code != 0 and "invalid job id" in out.stderr.lower():
            return {}
        return _parse_squeue(_checked(["squeue"], out))

    async def _jobs_named(self, name: str) -> list[str]:
        out = await self._check(["squeue", "-h", "--states=all", "-n", name, "-o", "%i|%T|%j"])
        return [job_id for job_id, job in _parse_squeue(out).items() if job.name == name]

    async def _sacct(self, job_ids: Sequence[str]) -> dict[tuple[str, str], str]:
        """(job id, job name) -> state from accounting; empty when the cluster keeps none."""
        if self._accounting is False:
            return {}
        ids = ",".join(job_ids)
        command = ["sacct", "-n", "-X", "-P", "-j", ids, "-o", "JobID,State,JobName"]
        try:
            out = await self._run(command)
        except LauncherError as exc:
            log.warning("sacct unusable; runs without a result count as lost: %s", exc)
            return {}
        if out.code != 0:
            if "accounting storage is disabled" in out.stderr.lower():
                self._accounting = False  # this cluster has no slurmdbd: never ask again
            else:
                log.warning("sacct failed (exit %d): %s", out.code, out.stderr.strip()[:300])
            return {}
        self._accounting = True
        return _parse_sacct(out.stdout)

    # --- results, progress, cancel, attach ------------------------------------------------

    async def result(self, handle: RunHandle) -> RunResult:
        return await asyncio.to_thread(self._read_result, handle.external_id)

    def _read_result(self, external_id: str) -> RunResult:
        run = self._locate(external_id)
        if run is None:
            raise LauncherError(f"unknown Slurm run {external_id!r}")
        try:
            raw = _read_bounded(run[1] / RESULT_FILE, MAX_RESULT_BYTES)
            return RunResult.from_json(json.loads(raw))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LauncherError(f"run {external_id}: unreadable result ({exc})") from exc

    async def progress(self, handle: RunHandle) -> list[ProgressEvent]:
        return await asyncio.to_thread(self._read_progress, handle.external_id)

    def _read_progress(self, external_id: str) -> list[ProgressEvent]:
        run = self._locate(external_id)
        if run is None:
            return []
        try:
            text = _read_bounded(run[1] / PROGRESS_FILE, MAX_PROGRESS_BYTES, truncate=True)
        except OSError:
            return []
        return parse_events(text.decode("utf-8", errors="replace"))

    async def cancel(self, handle: RunHandle) -> None:
        """scancel; Slurm sends SIGTERM (the runner then kills its tree) and SIGKILL after
        KillWait. Returns once the signal is sent, not when the job has gone."""
        run = await asyncio.to_thread(self._locate, handle.external_id)
        if run is None:
            return
        job_id, run_dir = run
        # --name: never cancel someone else's job that reused a forgotten job id.
        out = await self._run(["scancel", f"--name={job_name(run_dir.name)}", job_id])
        if out.code != 0 and not any(m in out.stderr.lower() for m in _GONE_MESSAGES):
            _checked(["scancel"], out)

    def attach(self, external_id: str) -> RunHandle:
        """Takes a job id, or the dispatch key (resolved to its job id if it has one)."""
        return RunHandle(self.name, self._job_id(external_id) or external_id)

    async def release(self, handle: RunHandle) -> None:
        """Removes the run directory (request, script, output, result) and its by-id link."""
        run = await asyncio.to_thread(self._locate, handle.external_id)
        if run is not None:
            await asyncio.to_thread(self._remove, *run)

    async def _sweep_now_and_then(self) -> None:
        """At most once per `SWEEP_EVERY_S`, on a dispatch: a bot that submits also cleans."""
        now = time.monotonic()
        if self._last_sweep is not None and now - self._last_sweep < SWEEP_EVERY_S:
            return
        self._last_sweep = now
        try:
            removed = await self.sweep()
        except (LauncherError, OSError) as exc:
            log.warning("sweeping %s failed: %s", self.shared_dir, exc)
            return
        if removed:
            log.info("removed %d stale run directories from %s", len(removed), self.shared_dir)

    async def sweep(self, *, older_than_s: float = STALE_RUN_S) -> list[str]:
        """Removes run directories left by runs nobody will collect (a worker that gave up or
        died): untouched for `older_than_s` and not queued or running. Returns their keys."""
        stale = await asyncio.to_thread(self._untouched_runs, older_than_s)
        jobs = {key: job_id for key, job_id in stale.items() if job_id}
        states = await self.states([RunHandle(self.name, j) for j in jobs.values()]) if jobs else {}
        removed = []
        for key, job_id in stale.items():
            if job_id and states.get(job_id) in (RunState.QUEUED, RunState.RUNNING):
                continue
            await asyncio.to_thread(self._remove, job_id, self.shared_dir / key)
            removed.append(key)
        return removed

    def _untouched_runs(self, older_than_s: float) -> dict[str, str | None]:
        """Key -> recorded job id of run directories not modified for `older_than_s`."""
        if not self.shared_dir.is_dir():
            return {}
        cutoff = time.time() - older_than_s
        found: dict[str, str | None] = {}
        for entry in self.shared_dir.iterdir():
            if entry.name == BY_ID_DIR or not _KEY.fullmatch(entry.name) or not entry.is_dir():
                continue
            newest = max((p.stat().st_mtime for p in entry.iterdir()), default=0.0)
            if max(newest, entry.stat().st_mtime) < cutoff:
                found[entry.name] = _read_job_id(entry)
        return found

    def _remove(self, job_id: str | None, run_dir: Path) -> None:
        if job_id is not None:
            link = self.shared_dir / BY_ID_DIR / job_id
            if self._run_dir(job_id) == run_dir:
                link.unlink(missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)

    # --- paths and commands --------------------------------------------------------------

    def _key_dir(self, key: str) -> Path:
        # All digits would read as a job id in `attach`.
        if not _KEY.fullmatch(key) or key == BY_ID_DIR or _JOB_ID.fullmatch(key):
            raise LauncherError(f"invalid Slurm run key {key!r}")
        return self.shared_dir / key

    def _job_id(self, external_id: str) -> str | None:
        """The job id behind an external id: the id itself, or the one recorded for a key."""
        if _JOB_ID.fullmatch(external_id):
            return external_id
        if not _KEY.fullmatch(external_id) or external_id == BY_ID_DIR:
            return None
        return _read_job_id(self.shared_dir / external_id)

    def _run_dir(self, job_id: str) -> Path | None:
        """The run directory of a job id, if by-id points at a run that records that id."""
        try:
            key = PurePosixPath(str((self.shared_dir / BY_ID_DIR / job_id).readlink())).name
        except (OSError, ValueError):
            return None
        if not _KEY.fullmatch(key) or key == BY_ID_DIR:
            return None
        run_dir = self.shared_dir / key
        return run_dir if _read_job_id(run_dir) == job_id else None

    def _locate(self, external_id: str) -> tuple[str, Path] | None:
        """The job id and run directory behind an external id (job id or key)."""
        job_id = self._job_id(external_id)
        run_dir = self._run_dir(job_id) if job_id else None
        return None if job_id is None or run_dir is None else (job_id, run_dir)

    async def _run(self, command: Sequence[str]) -> _Output:
        """Runs a command without a shell, bounded by `command_timeout`."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise LauncherError(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.command_timeout)
        except TimeoutError:
            raise LauncherError(
                f"{command[0]} did not answer within {self.command_timeout:g} s"
            ) from None
        finally:
            if proc.returncode is None:  # timed out or cancelled: leave no child behind
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        code = proc.returncode if proc.returncode is not None else -1
        return _Output(code, out.decode(errors="replace"), err.decode(errors="replace"))

    async def _check(self, command: Sequence[str]) -> str:
        return _checked(command, await self._run(command))


# --- pure helpers (unit-tested without Slurm) -----------------------------------------------


def job_name(key: str) -> str:
    return f"{JOB_NAME_PREFIX}{key}"


def time_limit_minutes(request: RunRequest) -> int:
    """Slurm's --time in whole minutes, rounded up from the run's own timeout."""
    return max(1, math.ceil(run_timeout(request) / 60))


def sbatch_command(request: RunRequest, key: str, gpu: GpuType | None, run_dir: Path) -> list[str]:
    """The sbatch command line for one run, with the GPU type's registry parameters."""
    command = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name(key)}",
        f"--time={time_limit_minutes(request)}",
        "--nodes=1",
        "--ntasks=1",
        # Nothing of this process's environment (tokens) travels with the job.
        "--export=NONE",
        f"--output={run_dir / OUTPUT_FILE}",
        f"--chdir={run_dir}",
    ]
    command += _param_options(gpu)
    command.append(str(run_dir / SCRIPT_FILE))
    return command


def _param_options(gpu: GpuType | None) -> list[str]:
    if gpu is None:
        return []
    params = dict(gpu.params)
    # A misspelt parameter must not silently send jobs to the default partition.
    unknown = sorted(set(params) - set(SBATCH_PARAMS))
    if unknown:
        raise LauncherError(
            f"GPU type {gpu.name}: unknown Slurm parameter(s) {', '.join(unknown)} "
            f"(known: {', '.join(SBATCH_PARAMS)})"
        )
    options = []
    for param, option in SBATCH_PARAMS.items():
        value = params.get(param)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise LauncherError(
                f"GPU type {gpu.name}: Slurm parameter {param} must be a string or a number"
            )
        options.append(f"{option}={value}")
    return options


def batch_script(key: str, run_dir: Path, python: str, extra_env: Mapping[str, str]) -> str:
    """The job: the runner reads the payload; a whole result is renamed into result.json."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in extra_env.items())
    runner = (
        f"{shlex.quote(python)} -m cluster_manager.harness.runner --payload {PAYLOAD_FILE} "
        f"--output {PARTIAL_RESULT_FILE} --progress 2> {PROGRESS_FILE}"
    )
    return (
        "#!/bin/bash\n"
        f"# cluster-manager run {key}\n"
        f"{exports}"
        f"cd {shlex.quote(str(run_dir))} || exit 1\n"
        f"{runner} || exit $?\n"
        # The exit code says whether result.json is there: 0 only after the rename.
        f"[ -s {PARTIAL_RESULT_FILE} ] || exit 1\n"
        f"exec mv -f {PARTIAL_RESULT_FILE} {RESULT_FILE}\n"
    )


def slurm_state(state: str, *, has_result: bool, settled: bool = False) -> RunState:
    """Maps a Slurm job state (squeue %T or sacct State) to a run state.

    The job script exits 0 only after renaming the result into place, so a COMPLETED job
    whose result is not visible yet is a shared file system catching up: still RUNNING,
    unless the job ended long ago (`settled`: known only to accounting).
    """
    word = (state.split() or [""])[0].rstrip("+").upper()
    if word in _QUEUED:
        return RunState.QUEUED
    if word in _RUNNING:
        return RunState.RUNNING
    if has_result:
        return RunState.FINISHED
    if word == "COMPLETED" and not settled:
        return RunState.RUNNING
    return RunState.LOST


def _parse_sbatch(stdout: str) -> str:
    """`sbatch --parsable` prints `<job id>` or `<job id>;<cluster>`."""
    first = (stdout.strip().splitlines() or [""])[0]
    job_id = first.split(";", 1)[0].strip()
    if not _JOB_ID.fullmatch(job_id):
        raise LauncherError(f"unexpected sbatch output: {stdout.strip()[:200]!r}")
    return job_id


def _parse_squeue(stdout: str) -> dict[str, _QueuedJob]:
    jobs = {}
    for line in filter(None, map(str.strip, stdout.splitlines())):
        parts = line.split("|", 2)
        if len(parts) != 3 or not _JOB_ID.fullmatch(parts[0]):
            raise LauncherError(f"unexpected squeue output: {line[:200]!r}")
        jobs[parts[0]] = _QueuedJob(parts[1], parts[2])
    return jobs


def _parse_sacct(stdout: str) -> dict[tuple[str, str], str]:
    """`sacct -P -o JobID,State,JobName` lines; a reused job id shows up once per job."""
    states = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and _JOB_ID.fullmatch(parts[0]):
            states[(parts[0], parts[2])] = parts[1]
    return states


def _queue_state(queued: _QueuedJob | None, run_dir: Path, has_result: bool) -> RunState | None:
    """The state of a run from squeue's line for its job; None if squeue has no say."""
    if queued is not None and queued.name == job_name(run_dir.name):
        return slurm_state(queued.state, has_result=has_result)
    # Purged by slurmctld (or the id now belongs to another job): the result file decides.
    return RunState.FINISHED if has_result else None


def _checked(command: Sequence[str], out: _Output) -> str:
    if out.code != 0:
        detail = out.stderr.strip()[:1000] or out.stdout.strip()[:1000] or "no output"
        raise LauncherError(f"{command[0]} failed (exit {out.code}): {detail}")
    return out.stdout


def _read_job_id(run_dir: Path) -> str | None:
    try:
        job_id = (run_dir / JOB_ID_FILE).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None
    return job_id if _JOB_ID.fullmatch(job_id) else None


def _read_bounded(path: Path, limit: int, *, truncate: bool = False) -> bytes:
    with path.open("rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        if truncate:
            return data[:limit]
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data


def _replace_text(path: Path, text: str) -> None:
    """Writes a small file whole or not at all (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text, encoding="ascii")
    tmp.replace(path)
