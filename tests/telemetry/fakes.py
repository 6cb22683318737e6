"""Probes that sample no GPU: injected through the runner's `gpu_probe` or, for a runner in
its own process, CLUSTER_MANAGER_GPU_PROBE=tests.telemetry.fakes:<factory>."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

from cluster_manager.telemetry.probes import Sample

CLEAN = Sample(
    sm_clock_mhz=1980,
    sm_clock_max_mhz=1980,
    mem_clock_mhz=2619,
    mem_clock_max_mhz=2619,
    temperature_c=61,
    power_w=412.5,
    power_limit_w=700,
)
HOT = Sample(
    sm_clock_mhz=1755,
    sm_clock_max_mhz=1980,
    mem_clock_mhz=2619,
    mem_clock_max_mhz=2619,
    temperature_c=74,
    power_w=698,
    power_limit_w=700,
    reasons=frozenset({"sw_thermal_slowdown"}),
)
IDLE = Sample(sm_clock_mhz=345, temperature_c=40, reasons=frozenset({"gpu_idle"}))


class FakeProbe:
    name = "fake"
    unavailable_reason = ""

    def __init__(self, samples: Sequence[Sample], device: str | None = None) -> None:
        self.device = device
        self.taken = 0
        self.closed = False
        self._next = itertools.cycle(samples)

    def describe(self) -> str:
        return "Fake GPU"

    def sample(self) -> Sample:
        self.taken += 1
        return next(self._next)

    def close(self) -> None:
        self.closed = True


def clean_probe(device: str | None) -> FakeProbe:
    return FakeProbe([CLEAN], device)


def throttled_probe(device: str | None) -> FakeProbe:
    return FakeProbe([HOT], device)


HOT_ONCE_ENV = "CM_TEST_HOT_ONCE"  # a path: the first probe opened creates it and runs hot


def hot_once_probe(device: str | None) -> FakeProbe:
    """Hot for the first run on the machine (across runner processes), clean after it."""
    try:
        os.close(os.open(os.environ[HOT_ONCE_ENV], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return FakeProbe([CLEAN], device)
    return FakeProbe([HOT], device)
