"""The GPU registry: which GPU types this deployment serves, and which launcher runs each.

Read from one YAML file (the shipped `cluster_manager/data/gpus.yml` unless
CLUSTER_MANAGER_GPUS names another): a mapping of GPU type name to its `launcher`
(local | github | modal | slurm), `max_concurrent` jobs, optional resource `limits` for its
runs, the compiler target `arch` (sm_90a, gfx942) and `devices` one machine has, and the
launcher's own parameters (workflow and runner labels, Modal GPU, Slurm
partition/account/gres), and its `peaks` (memory bandwidth and FLOP rates, for the speed of
light: `core/speed_of_light.py`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster_manager.core.arch import valid_arch
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Limits
from cluster_manager.core.speed_of_light import Peaks, parse_peaks
from cluster_manager.data import GPUS_FILE

LAUNCHERS = ("local", "github", "modal", "slurm")
DEFAULT_REGISTRY_FILE = GPUS_FILE
_GPU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,31}")
# Parameters each launcher requires; anything else in the entry is passed along as is.
_REQUIRED = {
    "github": ("workflow", "runner_labels"),
    "modal": ("modal_gpu",),
    "slurm": (),
    "local": (),
}
MIB = 1024 * 1024
# A local "device" is a core: the ranks of a multi-GPU task run as processes here (gloo).
_LOCAL_DEVICES = os.cpu_count() or 1
# Registry `limits:` keys -> (Limits field, unit).
LIMIT_KEYS = {
    "memory_mb": ("memory_bytes", MIB),
    "disk_mb": ("disk_bytes", MIB),
    "file_mb": ("file_bytes", MIB),
    "open_files": ("open_files", 1),
    "processes": ("processes", 1),
}


class UnknownGpuError(ClusterManagerError):
    """A GPU type name that the registry does not know; the text names those it does."""


class InvalidRegistryError(ClusterManagerError):
    """A GPU registry (`gpus.yml`) that cannot be used: names the file, the key and why."""


# The longest run each launcher lets finish: the workflows' `timeout-minutes` (GitHub cancels
# a job past it) and the Modal functions' timeout (`modal_app.TIMEOUT_S`). Slurm's comes from
# the partition (sbatch --time is asked per run); the local launcher has none.
GITHUB_TIMEOUT_MINUTES = 180
MODAL_TIMEOUT_S = 3 * 3600
LAUNCHER_MAX_RUN_S = {"github": GITHUB_TIMEOUT_MINUTES * 60.0, "modal": float(MODAL_TIMEOUT_S)}
# The memory cap of a run on a GPU machine (every launcher but local) without `memory_mb`.
GPU_MEMORY_MB = 65536
# What a deployment sets to give a process each launcher (app.build_launchers); local is
# always there.
LAUNCHER_SETTINGS = {
    "github": "GITHUB_REPO and GITHUB_TOKENS",
    "modal": "CLUSTER_MANAGER_MODAL_APP",
    "slurm": "CLUSTER_MANAGER_SLURM_DIR",
}


@dataclass(frozen=True)
class GpuType:
    name: str
    launcher: str  # local | github | modal | slurm
    max_concurrent: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)  # Limits fields, from `limits:`
    # Devices one machine of this type has: how many ranks a multi-GPU task may start there.
    # The local launcher's ranks are processes on this machine's cores.
    devices: int = 1
    # Ranked submissions one user may run on this type per hour, across leaderboards (for
    # scarce GPUs); None: only the leaderboards' own limits.
    ranked_per_user_per_hour: int | None = None
    # The exact compiler target of its GPUs (sm_90a, sm_100a, gfx942): CUDA sources and torch
    # extensions are built for it. None: the toolchain's default (CPU types).
    arch: str | None = None
    # Its published peaks; None: unknown (a CPU runner measures its own machine's).
    peaks: Peaks | None = None

    @property
    def max_run_s(self) -> float | None:
        """The longest run the launcher of this type lets finish (None: no limit of its own).
        A leaderboard whose task may run longer is refused when it is created."""
        return LAUNCHER_MAX_RUN_S.get(self.launcher)

    def run_limits(self, base: Limits) -> Limits:
        """The limits of a run on this type: `base` (the settings), then the registry's own.

        The settings' memory cap (CLUSTER_MANAGER_LOCAL_MEMORY_MB) is this machine's: a run on
        another launcher gets GPU_MEMORY_MB unless the registry names its `memory_mb`."""
        if self.launcher != "local":
            base = dataclasses.replace(base, memory_bytes=GPU_MEMORY_MB * MIB)
        return dataclasses.replace(base, **self.limits)


@dataclass(frozen=True)
class GpuRegistry:
    types: Mapping[str, GpuType]

    def get(self, name: str) -> GpuType:
        try:
            return self.types[name]
        except KeyError:
            known = ", ".join(sorted(self.types)) or "none"
            raise UnknownGpuError(f"unknown GPU type {name!r} (known: {known})") from None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.types))

    def served_by(
        self, launchers: Collection[str], only: Collection[str] | None = None
    ) -> list[GpuType]:
        """The types a process with these launchers can run (of `only`, if given), in a stable
        order: by launcher, then name."""
        return sorted(
            (
                g
                for g in self.types.values()
                if g.launcher in launchers and (only is None or g.name in only)
            ),
            key=lambda g: (g.launcher, g.name),
        )

    def unserved_by(self, launchers: Collection[str]) -> dict[str, str]:
        """The types a process with these launchers cannot run, each with why and what to set
        (shown to whoever lists one on a leaderboard)."""
        return {
            g.name: f"{g.name} runs on the {g.launcher} launcher, which this deployment has "
            f"not configured: set {LAUNCHER_SETTINGS.get(g.launcher, 'it up')}"
            for g in self.types.values()
            if g.launcher not in launchers
        }

    def with_concurrency(self, launcher: str, max_concurrent: int) -> GpuRegistry:
        """The same registry with every type of `launcher` limited to `max_concurrent`."""
        return GpuRegistry(
            {
                name: dataclasses.replace(g, max_concurrent=max_concurrent)
                if g.launcher == launcher
                else g
                for name, g in self.types.items()
            }
        )


def default_registry(local_concurrency: int = 2) -> GpuRegistry:
    """On a machine without a GPU the local launcher serves the GPU type `CPU`."""
    cpu = GpuType("CPU", "local", max_concurrent=local_concurrency, devices=_LOCAL_DEVICES)
    return GpuRegistry({"CPU": cpu})


def parse_registry(data: object, source: str = "gpus.yml") -> GpuRegistry:
    def bad(key: str, reason: str) -> InvalidRegistryError:
        return InvalidRegistryError(f"invalid GPU registry {source}: {key}: {reason}")

    if not isinstance(data, dict) or not isinstance(data.get("gpus"), dict) or not data["gpus"]:
        raise bad("gpus", "must map GPU type names to their settings")
    types: dict[str, GpuType] = {}
    for name, entry in data["gpus"].items():
        key = f"gpus.{name}"
        if not isinstance(name, str) or not _GPU_NAME.fullmatch(name):
            raise bad(key, "a GPU type name is letters, digits, '_' or '-' (at most 32)")
        if not isinstance(entry, dict):
            raise bad(key, "must be a mapping with at least `launcher`")
        params = dict(entry)
        launcher = params.pop("launcher", None)
        if launcher not in LAUNCHERS:
            raise bad(f"{key}.launcher", f"must be one of {', '.join(LAUNCHERS)}")
        max_concurrent = params.pop("max_concurrent", 1)
        if not _positive(max_concurrent):
            raise bad(f"{key}.max_concurrent", "must be a positive whole number")
        devices = params.pop("devices", _LOCAL_DEVICES if launcher == "local" else 1)
        if not _positive(devices):
            raise bad(f"{key}.devices", "must be a positive whole number")
        for required in _REQUIRED[launcher]:
            if required not in params:
                raise bad(key, f"a {launcher} GPU needs `{required}`")
        labels = params.get("runner_labels")
        if labels is not None and (
            not isinstance(labels, list)
            or not labels
            or not all(isinstance(x, str) for x in labels)
        ):
            raise bad(f"{key}.runner_labels", "must be a non-empty list of labels")
        limits = _parse_limits(params.pop("limits", {}), f"{key}.limits", bad)
        ranked_cap = params.pop("ranked_per_user_per_hour", None)
        if ranked_cap is not None and not _positive(ranked_cap):
            raise bad(f"{key}.ranked_per_user_per_hour", "must be a positive whole number")
        arch = params.pop("arch", None)
        if arch is not None and not (isinstance(arch, str) and valid_arch(arch)):
            raise bad(f"{key}.arch", "must be a GPU target such as sm_90a or gfx942")
        try:
            peaks = None if "peaks" not in params else parse_peaks(params.pop("peaks"))
        except ValueError as exc:
            raise bad(f"{key}.peaks", str(exc)) from None
        types[name] = GpuType(
            name, launcher, max_concurrent, params, limits, devices, ranked_cap, arch, peaks
        )
    return GpuRegistry(types)


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _parse_limits(
    data: object, key: str, bad: Callable[[str, str], InvalidRegistryError]
) -> dict[str, int]:
    if not isinstance(data, dict):
        raise bad(key, f"must map {', '.join(LIMIT_KEYS)} to whole numbers")
    limits = {}
    for name, value in data.items():
        if name not in LIMIT_KEYS:
            raise bad(f"{key}.{name}", f"unknown limit (known: {', '.join(LIMIT_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad(f"{key}.{name}", "must be a positive whole number")
        field_name, unit = LIMIT_KEYS[name]
        limits[field_name] = value * unit
    return limits


def load_registry(path: Path = DEFAULT_REGISTRY_FILE) -> GpuRegistry:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidRegistryError(f"cannot read the GPU registry {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidRegistryError(f"invalid GPU registry {path}: not valid YAML: {exc}") from None
    return parse_registry(data, str(path))
