"""What every row reads, made once: this run's folder, the GPU type the machine stands for
(a GPU registry of the local launcher), and the environment of the project's commands."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import yaml

from cluster_manager.core.gpus import DEFAULT_REGISTRY_FILE, GPU_MEMORY_MB
from cluster_manager.data import EXAMPLES_DIR
from gpu_check.machine import Facts
from gpu_check.rows_runner import Setting

CARRY = ".gpu-carry"


def make_setting(root: Path, facts: Facts, *, gpu: str, out: Path | None) -> Setting:
    work = Path(os.environ.get("GPU_CHECK_WORK") or tempfile.mkdtemp(prefix="cm-gpu-check."))
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)  # the sandbox-user row's user reads the installed package under it
    registry = work / "gpus.yml"
    registry.write_text(yaml.safe_dump(registry_for(gpu, facts), sort_keys=False))
    return Setting(
        root=root,
        work=work,
        carry=Path(os.environ.get("GPU_CHECK_CARRY") or root / CARRY),
        examples=EXAMPLES_DIR,
        env=command_env(dict(os.environ), registry),
        facts=dataclasses.asdict(facts),
        gpu=gpu,
        out=out,
    )


def registry_for(gpu: str, facts: Facts) -> dict[str, object]:
    """The shipped registry's `gpu` as a type of the local launcher (this machine), compiled for
    this device's own target, with the shipped type's published peaks; and `CPU`."""
    shipped = yaml.safe_load(DEFAULT_REGISTRY_FILE.read_text())["gpus"]
    entry: dict[str, object] = {
        "launcher": "local",
        "max_concurrent": 1,
        "devices": max(1, facts.device_count),
    }
    if facts.capability is not None:
        major, minor = facts.capability
        # From Hopper on, the exact target carries the arch-specific instructions (sm_90a).
        entry["arch"] = f"sm_{major}{minor}{'a' if major >= 9 else ''}"
    if "peaks" in shipped.get(gpu, {}):
        entry["peaks"] = shipped[gpu]["peaks"]
    return {"gpus": {gpu: entry, "CPU": shipped["CPU"]}}


def command_env(environ: dict[str, str], registry: Path) -> dict[str, str]:
    """Ours, with the registry above, and without the check's own folder on PYTHONPATH: the
    runs see the installed package and the machine's packages, nothing of the check."""
    own = str(Path(__file__).resolve().parents[1])
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != own]
    env = {**environ, "CLUSTER_MANAGER_GPUS": str(registry)}
    # A run here gets the memory cap of a run on any GPU machine, not a laptop's local one.
    env.setdefault("CLUSTER_MANAGER_LOCAL_MEMORY_MB", str(GPU_MEMORY_MB))
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    return env
