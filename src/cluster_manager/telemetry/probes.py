"""The one narrow interface between the runner and a GPU vendor's management library.

A probe reads the run's device once per `sample()`; vendor code lives in one module per vendor
(`nvml`, `amd`), imported only when that probe is opened. `NoProbe` stands in where nothing can
be read (a CPU machine, a driver that does not open) and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from cluster_manager.core.protocol import VISIBLE_DEVICE_ENVS
from cluster_manager.core.telemetry import NO_PROBE


@dataclass(frozen=True)
class Sample:
    """One reading of the device; None where the driver does not report a quantity."""

    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    reasons: frozenset[str] = frozenset()  # active clock-throttle reasons (core.telemetry)


class GpuProbe(Protocol):
    name: str  # shown in reports: "NVML", "AMD SMI", "none"
    unavailable_reason: str  # why it cannot sample; "" when it can

    def describe(self) -> str:
        """The device it reads (its product name), or "" when none."""
        ...

    def sample(self) -> Sample: ...

    def close(self) -> None: ...


# Opens a probe of the given device: an index or UUID as the pinning names it, None for the
# first device. It never raises: a probe that cannot open is a `NoProbe` saying why.
ProbeFactory = Callable[[str | None], GpuProbe]


class NoProbe:
    name = NO_PROBE

    def __init__(self, reason: str) -> None:
        self.unavailable_reason = reason

    def describe(self) -> str:
        return ""

    def sample(self) -> Sample:
        raise RuntimeError(self.unavailable_reason)

    def close(self) -> None:
        pass


def no_probe(_device: str | None = None) -> GpuProbe:
    return NoProbe("GPU telemetry is turned off (CLUSTER_MANAGER_GPU_PROBE=none)")


def visible_device(env: Mapping[str, str]) -> str | None:
    """The device the task's processes see first (their index 0), as the pinning in their
    environment `env` names it; None when nothing is pinned (the machine's first)."""
    for name in VISIBLE_DEVICE_ENVS:
        first = env.get(name, "").split(",")[0].strip()
        if first:
            return first
    return None
