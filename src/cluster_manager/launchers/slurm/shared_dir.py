"""The shared directory: a run directory per dispatch key, and by-id links from job ids to them.

It must be visible at the same path on this host and on the compute nodes:

    <shared>/<key>/payload.txt      the request as a payload (core.payload), read by the runner
    <shared>/<key>/job.sh           the batch script
    <shared>/<key>/slurm_job_id     written as soon as sbatch answers
    <shared>/<key>/progress.jsonl   the runner's progress events (its stderr)
    <shared>/<key>/result.json      the RunResult, moved into place once the runner has exited
    <shared>/<key>/slurm.out        what Slurm captured of the job's output
    <shared>/by-id/<job id>         a symlink to ../<key>: a job id finds its run directory

Everything here but `key_dir` is blocking file-system work, and the shared directory may be a
slow network file system: the launcher calls it through `asyncio.to_thread`, never on the
event loop.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.models import RunRequest
from cluster_manager.core.payload import encode_payload
from cluster_manager.core.progress import ProgressEvent, parse_events
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.slurm.names import JOB_ID, KEY

PAYLOAD_FILE = "payload.txt"
SCRIPT_FILE = "job.sh"
JOB_ID_FILE = "slurm_job_id"
PROGRESS_FILE = "progress.jsonl"
RESULT_FILE = "result.json"
PARTIAL_RESULT_FILE = "result.json.part"
OUTPUT_FILE = "slurm.out"
BY_ID_DIR = "by-id"

MAX_RESULT_BYTES = 64 * 1024 * 1024
MAX_PROGRESS_BYTES = 4 * 1024 * 1024

# What an earlier dispatch under the same key may have left: never mistaken for this one's.
_STALE_FILES = (JOB_ID_FILE, RESULT_FILE, PARTIAL_RESULT_FILE, PROGRESS_FILE, OUTPUT_FILE)


class SharedDir:
    """The run directories under `root` (an absolute path)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    # --- writing a run -------------------------------------------------------------------

    def key_dir(self, key: str) -> Path:
        """The run directory of a dispatch key; checks the key, touches nothing."""
        # All digits would read as a job id in `attach`.
        if not KEY.fullmatch(key) or key == BY_ID_DIR or JOB_ID.fullmatch(key):
            raise LauncherError(f"invalid Slurm run key {key!r}")
        return self.root / key

    def existing(self, run_dir: Path) -> tuple[bool, str | None]:
        """Whether the run directory is there, and the job id it records if any."""
        if not run_dir.is_dir():
            return False, None
        return True, _read_job_id(run_dir)

    def prepare(self, run_dir: Path, request: RunRequest, script: str) -> None:
        """Writes the payload and the batch script, removing what an earlier dispatch left."""
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for stale in _STALE_FILES:
            (run_dir / stale).unlink(missing_ok=True)
        # It holds the secret seed: readable by this user alone (the sandbox runs as another).
        payload = run_dir / PAYLOAD_FILE
        payload.unlink(missing_ok=True)
        fd = os.open(payload, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(encode_payload(request))
        script_file = run_dir / SCRIPT_FILE
        script_file.write_text(script, "utf-8")
        script_file.chmod(0o700)

    def record(self, run_dir: Path, job_id: str) -> None:
        """Writes the job id next to the run, then points by-id/<job id> at the run."""
        _replace_text(run_dir / JOB_ID_FILE, job_id)
        by_id = self.root / BY_ID_DIR
        by_id.mkdir(parents=True, exist_ok=True)
        # Replaced, not kept: a job id reused after a controller reset must find the new run.
        tmp = by_id / f".{job_id}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(Path("..") / run_dir.name)
        tmp.replace(by_id / job_id)

    # --- finding a run -------------------------------------------------------------------

    def job_id(self, external_id: str) -> str | None:
        """The job id behind an external id: the id itself, or the one recorded for a key."""
        if JOB_ID.fullmatch(external_id):
            return external_id
        if not KEY.fullmatch(external_id) or external_id == BY_ID_DIR:
            return None
        return _read_job_id(self.root / external_id)

    def run_dir(self, job_id: str) -> Path | None:
        """The run directory of a job id, if by-id points at a run that records that id."""
        try:
            key = PurePosixPath(str((self.root / BY_ID_DIR / job_id).readlink())).name
        except (OSError, ValueError):
            return None
        if not KEY.fullmatch(key) or key == BY_ID_DIR:
            return None
        run_dir = self.root / key
        return run_dir if _read_job_id(run_dir) == job_id else None

    def locate(self, external_id: str) -> tuple[str, Path] | None:
        """The job id and run directory behind an external id (job id or key)."""
        job_id = self.job_id(external_id)
        run_dir = self.run_dir(job_id) if job_id else None
        return None if job_id is None or run_dir is None else (job_id, run_dir)

    def survey(self, external_ids: Sequence[str]) -> dict[str, tuple[str, Path, bool] | None]:
        """Job id, run directory and whether its result is there, per external id."""
        found: dict[str, tuple[str, Path, bool] | None] = {}
        for external_id in external_ids:
            run = self.locate(external_id)
            found[external_id] = None if run is None else (*run, (run[1] / RESULT_FILE).is_file())
        return found

    # --- reading a run -------------------------------------------------------------------

    def read_result(self, external_id: str) -> RunResult:
        run = self.locate(external_id)
        if run is None:
            raise LauncherError(f"unknown Slurm run {external_id!r}")
        try:
            raw = _read_bounded(run[1] / RESULT_FILE, MAX_RESULT_BYTES)
            return RunResult.from_json(json.loads(raw))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LauncherError(f"run {external_id}: unreadable result ({exc})") from exc

    def read_progress(self, external_id: str) -> list[ProgressEvent]:
        """The events so far; none for an unknown run or an unreadable log (it may not exist
        yet), the first `MAX_PROGRESS_BYTES` of an oversized one."""
        run = self.locate(external_id)
        if run is None:
            return []
        try:
            text = _read_bounded(run[1] / PROGRESS_FILE, MAX_PROGRESS_BYTES, truncate=True)
        except OSError:
            return []
        return parse_events(text.decode("utf-8", errors="replace"))

    # --- removing runs -------------------------------------------------------------------

    def untouched_runs(self, older_than_s: float) -> dict[str, str | None]:
        """Key -> recorded job id of run directories not modified for `older_than_s`."""
        if not self.root.is_dir():
            return {}
        cutoff = time.time() - older_than_s
        found: dict[str, str | None] = {}
        for entry in self.root.iterdir():
            if entry.name == BY_ID_DIR or not KEY.fullmatch(entry.name) or not entry.is_dir():
                continue
            newest = max((p.stat().st_mtime for p in entry.iterdir()), default=0.0)
            if max(newest, entry.stat().st_mtime) < cutoff:
                found[entry.name] = _read_job_id(entry)
        return found

    def remove(self, job_id: str | None, run_dir: Path) -> None:
        """Removes a run directory, and its by-id link if that still points at it."""
        if job_id is not None:
            link = self.root / BY_ID_DIR / job_id
            if self.run_dir(job_id) == run_dir:
                link.unlink(missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def _read_job_id(run_dir: Path) -> str | None:
    try:
        job_id = (run_dir / JOB_ID_FILE).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None
    return job_id if JOB_ID.fullmatch(job_id) else None


def _read_bounded(path: Path, limit: int, *, truncate: bool = False) -> bytes:
    """At most `limit` bytes: a runaway file is cut (`truncate`) or refused, never read whole."""
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
