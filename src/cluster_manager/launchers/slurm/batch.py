"""The batch job of a run: the sbatch command line, the job script, and sbatch's answer."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.phases import run_timeout
from cluster_manager.launchers.slurm.names import JOB_ID, job_name
from cluster_manager.launchers.slurm.shared_dir import (
    OUTPUT_FILE,
    PARTIAL_RESULT_FILE,
    PAYLOAD_FILE,
    PROGRESS_FILE,
    RESULT_FILE,
    SCRIPT_FILE,
)

# Registry parameter -> sbatch option. A parameter left out (or empty) is not passed at all,
# so a GPU type without `gres` asks for no generic resource. The count of its `gpu` resource
# is each run's own (a multi-GPU task's world_size): Slurm then pins the job to that many GPUs
# (CUDA_VISIBLE_DEVICES), which the runner passes on to the task.
SBATCH_PARAMS = {
    "partition": "--partition",
    "account": "--account",
    "gres": "--gres",
    "cpus_per_task": "--cpus-per-task",
    "mem": "--mem",
}

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env_names(names: Iterable[str]) -> None:
    """The script exports these names unquoted: anything but an identifier is refused."""
    for name in names:
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"invalid environment variable name {name!r}")


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
    command += _param_options(gpu, request.gpu_count)
    command.append(str(run_dir / SCRIPT_FILE))
    return command


def gres_for(gres: str, gpu_count: int) -> str:
    """`gres` asking for `gpu_count` GPUs: `gpu:a100` and `gpu:a100:1` become `gpu:a100:2`
    for two; other resources in the list (`shard:1`) stay as they are."""
    entries = []
    for entry in gres.split(","):
        parts = entry.strip().split(":")
        if parts[0] == "gpu":
            parts = parts[:-1] if len(parts) > 1 and parts[-1].isdigit() else parts
            entry = ":".join([*parts, str(gpu_count)])
        entries.append(entry.strip())
    return ",".join(entries)


def _param_options(gpu: GpuType | None, gpu_count: int = 1) -> list[str]:
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
        if param == "gres":
            value = gres_for(str(value), gpu_count)
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


def parse_sbatch(stdout: str) -> str:
    """`sbatch --parsable` prints `<job id>` or `<job id>;<cluster>`."""
    first = (stdout.strip().splitlines() or [""])[0]
    job_id = first.split(";", 1)[0].strip()
    if not JOB_ID.fullmatch(job_id):
        raise LauncherError(f"unexpected sbatch output: {stdout.strip()[:200]!r}")
    return job_id
