"""Which GPUs a run may use: one job per GPU, never two jobs on one.

A machine with several GPUs runs one runner per GPU, each told its device(s) explicitly:
CLUSTER_MANAGER_DEVICES (device indices or UUIDs, comma-separated, as the runner service's
`.env` sets it), else CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES as the
runner service or Slurm (from the job's GRES) set them. The task's processes get the pinning
as the last word of their environment; a run that needs more devices than it was given fails
instead of sharing a GPU with another job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_manager.core.protocol import VISIBLE_DEVICE_ENVS

DEVICES_ENV = "CLUSTER_MANAGER_DEVICES"


@dataclass(frozen=True)
class Assignment:
    """The devices this runner was given, and which variable said so."""

    devices: tuple[str, ...] | None  # None: not pinned, every device of the machine
    source: str = ""

    def pin(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` with the pinning as its last word. An explicit assignment names the machine's
        own devices as nvidia-smi and rocm-smi number them (PCI order), so it replaces every
        visible-devices variable (ROCR's would renumber HIP's) and CUDA counts in that order
        too; vendor variables the runner inherited are passed on as they came."""
        pinned = {k: v for k, v in env.items() if k != DEVICES_ENV}
        if self.source == DEVICES_ENV and self.devices is not None:
            for name in VISIBLE_DEVICE_ENVS:
                pinned.pop(name, None)
            ids = ",".join(self.devices)
            pinned.update(CUDA_VISIBLE_DEVICES=ids, HIP_VISIBLE_DEVICES=ids)
            pinned.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        return pinned

    def explicit(self) -> tuple[str, ...] | None:
        """The devices when named in the machine's own numbering (DEVICES_ENV): the sandbox
        then shows only their nodes. Slurm's indices count what its cgroup left instead."""
        return self.devices if self.source == DEVICES_ENV else None

    def describe(self) -> str:
        if self.devices is None:
            return "not pinned"
        return f"{self.source}={','.join(self.devices)}"


def assigned(environ: Mapping[str, str]) -> Assignment:
    """The runner's devices, from the first of DEVICES_ENV and the vendor variables set."""
    for name in (DEVICES_ENV, *VISIBLE_DEVICE_ENVS):
        if name in environ:
            ids = tuple(part.strip() for part in environ[name].split(",") if part.strip())
            return Assignment(ids, name)
    return Assignment(None)


def shortage(assignment: Assignment, gpu_count: int, machine_gpus: int) -> str | None:
    """Why the run cannot have `gpu_count` devices of its own, or None when it can.
    `machine_gpus` counts what the machine has: without any, the ranks of a multi-GPU task
    are processes on cores, and an empty CUDA_VISIBLE_DEVICES only says so again."""
    if machine_gpus == 0:
        return None
    if assignment.devices is not None:
        available, where = len(assignment.devices), assignment.describe()
    else:
        available, where = machine_gpus, "the machine's GPUs"
    if gpu_count <= available:
        return None
    return (
        f"the run needs {gpu_count} GPU(s) (the task's world_size) but this runner was given "
        f"{available} ({where}); it refuses to share GPUs with other jobs"
    )


def check(gpu_count: int, system: dict[str, Any]) -> str | None:
    """This runner's devices, noted in `system` (RunResult.system), and why a run needing
    `gpu_count` of them must be refused here, if it must."""
    assignment = assigned(os.environ)
    system["devices"] = assignment.describe()
    return shortage(assignment, gpu_count, int(system.get("device_count") or 0))


def cuda_without_gpu(task: str, system: dict[str, Any]) -> str | None:
    """Why a CUDA task cannot run on this machine, if it has no GPU (`system_info`'s count):
    its binary would fail every case with the driver's error, which is not the submission's."""
    if int(system.get("device_count") or 0) > 0 or _device_nodes():
        return None
    return (
        f"{task} is CUDA code and needs a GPU; this machine has none (nvidia-smi and rocm-smi "
        "found no device). It compiled; run it where the leaderboard's GPUs are"
    )


def _device_nodes() -> bool:
    """A GPU's device nodes, for a machine whose nvidia-smi or rocm-smi is not on PATH."""
    dev = Path("/dev")
    return any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists()
