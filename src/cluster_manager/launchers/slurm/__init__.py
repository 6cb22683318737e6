"""Runs requests as Slurm batch jobs on nodes that share a directory with this host.

launcher.py     the Launcher: submit, states, result, progress, cancel, attach, release, sweep
shared_dir.py   the run directories and by-id links; blocking I/O, called via to_thread
batch.py        the sbatch command line, the job script and sbatch's answer
queue.py        squeue/sacct command lines and output, and Slurm states as run states
commands.py     running those commands: no shell, bounded in time
names.py        dispatch keys, job ids and job names
"""

from cluster_manager.launchers.slurm.batch import (
    SBATCH_PARAMS,
    batch_script,
    sbatch_command,
    time_limit_minutes,
)
from cluster_manager.launchers.slurm.launcher import STALE_RUN_S, SWEEP_EVERY_S, SlurmLauncher
from cluster_manager.launchers.slurm.names import job_name
from cluster_manager.launchers.slurm.queue import slurm_state

__all__ = [
    "SBATCH_PARAMS",
    "STALE_RUN_S",
    "SWEEP_EVERY_S",
    "SlurmLauncher",
    "batch_script",
    "job_name",
    "sbatch_command",
    "slurm_state",
    "time_limit_minutes",
]
