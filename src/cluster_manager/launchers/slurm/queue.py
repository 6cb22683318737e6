"""What squeue and sacct say about jobs, and what that means for a run's state.

The command lines are built here too: their output formats and the parsers must agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cluster_manager.core.errors import LauncherError
from cluster_manager.launchers.base import RunState
from cluster_manager.launchers.slurm.names import JOB_ID

_QUEUED = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
)
_RUNNING = frozenset(
    {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
)
_SQUEUE_FORMAT = "%i|%T|%j"  # job id, state, job name


@dataclass(frozen=True)
class QueuedJob:
    state: str
    name: str


def squeue_command(job_ids: Sequence[str]) -> list[str]:
    """--states=all: jobs that ended are listed too, until slurmctld purges them."""
    return ["squeue", "-h", "--states=all", "-j", ",".join(job_ids), "-o", _SQUEUE_FORMAT]


def squeue_by_name_command(name: str) -> list[str]:
    return ["squeue", "-h", "--states=all", "-n", name, "-o", _SQUEUE_FORMAT]


def sacct_command(job_ids: Sequence[str]) -> list[str]:
    return ["sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,JobName"]


def parse_squeue(stdout: str) -> dict[str, QueuedJob]:
    """Job id -> its state and name; a line in another format is a LauncherError."""
    jobs = {}
    for line in filter(None, map(str.strip, stdout.splitlines())):
        parts = line.split("|", 2)
        if len(parts) != 3 or not JOB_ID.fullmatch(parts[0]):
            raise LauncherError(f"unexpected squeue output: {line[:200]!r}")
        jobs[parts[0]] = QueuedJob(parts[1], parts[2])
    return jobs


def parse_sacct(stdout: str) -> dict[tuple[str, str], str]:
    """`sacct -P -o JobID,State,JobName` lines; a reused job id shows up once per job."""
    states = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and JOB_ID.fullmatch(parts[0]):
            states[(parts[0], parts[2])] = parts[1]
    return states


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


def queue_state(queued: QueuedJob | None, name: str, has_result: bool) -> RunState | None:
    """The state of the run whose job is named `name` from squeue's line for its job id;
    None if squeue has no say."""
    if queued is not None and queued.name == name:
        return slurm_state(queued.state, has_result=has_result)
    # Purged by slurmctld (or the id now belongs to another job): the result file decides.
    return RunState.FINISHED if has_result else None
