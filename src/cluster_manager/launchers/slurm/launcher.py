"""The Slurm launcher: `sbatch` to start, one `squeue` for many states, `scancel` to stop.

The external id is the Slurm job id. `attach` also takes the dispatch key (what the scheduler
records before dispatching) and resolves it through the job id recorded in its run directory.

States come from `squeue --states=all`, which also lists jobs that ended less than `MinJobAge`
seconds ago; the result file tells a finished run from a lost one. Jobs that slurmctld has
already forgotten are decided by the result file and, if the cluster keeps accounting (slurmdbd),
by one `sacct` call for those without one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.progress import ProgressEvent
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, RunHandle, RunState
from cluster_manager.launchers.slurm import commands, queue
from cluster_manager.launchers.slurm.batch import (
    batch_script,
    check_env_names,
    parse_sbatch,
    sbatch_command,
)
from cluster_manager.launchers.slurm.names import job_name
from cluster_manager.launchers.slurm.shared_dir import SharedDir

log = logging.getLogger(__name__)

# A run directory untouched this long, whose job is neither queued nor running, is left over.
STALE_RUN_S = 24 * 3600.0
SWEEP_EVERY_S = 3600.0

# scancel/squeue answers that mean "this job is over", not "the command failed".
_GONE_MESSAGES = ("invalid job id", "already completing or completed")


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
        # Blocking file-system work: called through asyncio.to_thread only.
        self.runs = SharedDir(self.shared_dir)
        self.python = python
        self.poll_interval = poll_interval
        self.extra_env = dict(extra_env or {})
        check_env_names(self.extra_env)
        self._accounting: bool | None = None  # unknown until sacct answers once
        self._last_sweep: float | None = None

    # --- submit --------------------------------------------------------------------------

    async def submit(
        self, request: RunRequest, key: str, *, gpu: GpuType | None = None
    ) -> RunHandle:
        run_dir = self.runs.key_dir(key)
        await self._sweep_now_and_then()
        existing = await self._adopt(run_dir)
        if existing is not None:
            return RunHandle(self.name, existing)  # already dispatched under this key
        command = sbatch_command(request, key, gpu, run_dir)  # bad parameters fail early
        script = batch_script(key, run_dir, self.python, self.extra_env)
        await asyncio.to_thread(self.runs.prepare, run_dir, request, script)
        job_id = parse_sbatch(await self._check(command))
        await asyncio.to_thread(self.runs.record, run_dir, job_id)
        return RunHandle(self.name, job_id)

    async def _adopt(self, run_dir: Path) -> str | None:
        """A job submitted earlier under this key that is not lost, if there is one."""
        exists, recorded = await asyncio.to_thread(self.runs.existing, run_dir)
        if not exists:
            return None
        # No id on file: sbatch may have answered just before the submitting process died.
        candidates = [recorded] if recorded else await self._jobs_named(job_name(run_dir.name))
        for job_id in candidates:
            if job_id != recorded:
                await asyncio.to_thread(self.runs.record, run_dir, job_id)
            if (await self.states([RunHandle(self.name, job_id)]))[job_id] is not RunState.LOST:
                return job_id
        return None

    # --- states --------------------------------------------------------------------------

    async def states(self, handles: Sequence[RunHandle]) -> dict[str, RunState]:
        runs = await asyncio.to_thread(self.runs.survey, [h.external_id for h in handles])
        located = {ext: run for ext, run in runs.items() if run is not None}
        listed = await self._squeue(sorted({job_id for job_id, _, _ in located.values()}))
        states = dict.fromkeys(runs, RunState.LOST)  # no run directory: nothing to wait for
        forgotten: dict[str, tuple[str, Path]] = {}
        for external_id, (job_id, run_dir, has_result) in located.items():
            state = queue.queue_state(listed.get(job_id), job_name(run_dir.name), has_result)
            if state is None:
                forgotten[external_id] = (job_id, run_dir)
            else:
                states[external_id] = state
        if forgotten:
            states.update(await self._accounted_states(forgotten))
        return states

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
                else queue.slurm_state(known, has_result=False, settled=True)
            )
        return states

    async def _squeue(self, job_ids: Sequence[str]) -> dict[str, queue.QueuedJob]:
        """One call for all ids; ended jobs are listed too until slurmctld purges them."""
        if not job_ids:
            return {}
        out = await self._run(queue.squeue_command(job_ids))
        # squeue fails, rather than printing nothing, when its only id is unknown.
        if out.code != 0 and "invalid job id" in out.stderr.lower():
            return {}
        return queue.parse_squeue(commands.checked(["squeue"], out))

    async def _jobs_named(self, name: str) -> list[str]:
        out = await self._check(queue.squeue_by_name_command(name))
        return [job_id for job_id, job in queue.parse_squeue(out).items() if job.name == name]

    async def _sacct(self, job_ids: Sequence[str]) -> dict[tuple[str, str], str]:
        """(job id, job name) -> state from accounting; empty when the cluster keeps none."""
        if self._accounting is False:
            return {}
        try:
            out = await self._run(queue.sacct_command(job_ids))
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
        return queue.parse_sacct(out.stdout)

    # --- results, progress, cancel, attach ------------------------------------------------

    async def result(self, handle: RunHandle) -> RunResult:
        return await asyncio.to_thread(self.runs.read_result, handle.external_id)

    async def progress(self, handle: RunHandle) -> list[ProgressEvent]:
        return await asyncio.to_thread(self.runs.read_progress, handle.external_id)

    async def cancel(self, handle: RunHandle) -> None:
        """scancel; Slurm sends SIGTERM (the runner then kills its tree) and SIGKILL after
        KillWait. Returns once the signal is sent, not when the job has gone."""
        run = await asyncio.to_thread(self.runs.locate, handle.external_id)
        if run is None:
            return
        job_id, run_dir = run
        # --name: never cancel someone else's job that reused a forgotten job id.
        out = await self._run(["scancel", f"--name={job_name(run_dir.name)}", job_id])
        if out.code != 0 and not any(m in out.stderr.lower() for m in _GONE_MESSAGES):
            commands.checked(["scancel"], out)

    def attach(self, external_id: str) -> RunHandle:
        """Takes a job id, or the dispatch key (resolved to its job id if it has one)."""
        return RunHandle(self.name, self.runs.job_id(external_id) or external_id)

    # --- cleaning up ---------------------------------------------------------------------

    async def release(self, handle: RunHandle) -> None:
        """Removes the run directory (request, script, output, result) and its by-id link."""
        run = await asyncio.to_thread(self.runs.locate, handle.external_id)
        if run is not None:
            await asyncio.to_thread(self.runs.remove, *run)

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
        stale = await asyncio.to_thread(self.runs.untouched_runs, older_than_s)
        jobs = {key: job_id for key, job_id in stale.items() if job_id}
        states = await self.states([RunHandle(self.name, j) for j in jobs.values()]) if jobs else {}
        removed = []
        for key, job_id in stale.items():
            if job_id and states.get(job_id) in (RunState.QUEUED, RunState.RUNNING):
                continue
            await asyncio.to_thread(self.runs.remove, job_id, self.shared_dir / key)
            removed.append(key)
        return removed

    # --- commands ------------------------------------------------------------------------

    async def _run(self, command: Sequence[str]) -> commands.Output:
        return await commands.run(command, self.command_timeout)

    async def _check(self, command: Sequence[str]) -> str:
        return commands.checked(command, await self._run(command))
