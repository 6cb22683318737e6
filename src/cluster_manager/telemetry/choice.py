"""Which probe a runner opens: CLUSTER_MANAGER_GPU_PROBE names it.

    nvml | amdsmi | none     that vendor's probe, or no telemetry at all
    package.module:factory   a `ProbeFactory` of one's own (tests inject fakes this way)
    unset, or auto           NVML, else AMD SMI, else none, with both reasons

Choosing never fails a run: a probe that cannot open, or a name that is no probe, is a
`NoProbe` saying why (in the result's telemetry, where the operator sees it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

from cluster_manager.telemetry.amd import open_amdsmi
from cluster_manager.telemetry.nvml import open_nvml
from cluster_manager.telemetry.probes import GpuProbe, NoProbe, ProbeFactory, no_probe

PROBE_ENV = "CLUSTER_MANAGER_GPU_PROBE"
PROBES: dict[str, ProbeFactory] = {"nvml": open_nvml, "amdsmi": open_amdsmi, "none": no_probe}


def open_any(device: str | None) -> GpuProbe:
    """The first vendor probe that opens; else a NoProbe with every vendor's reason."""
    reasons = []
    for factory in (open_nvml, open_amdsmi):
        probe = factory(device)
        if not probe.unavailable_reason:
            return probe
        reasons.append(probe.unavailable_reason)
    return NoProbe("; ".join(reasons))


def chosen_factory(environ: Mapping[str, str] | None = None) -> ProbeFactory:
    """The factory CLUSTER_MANAGER_GPU_PROBE names (in `environ`, else ours)."""
    name = (os.environ if environ is None else environ).get(PROBE_ENV, "").strip()
    if name in ("", "auto"):
        return open_any
    if name in PROBES:
        return PROBES[name]
    module, _, attribute = name.partition(":")
    try:
        factory: ProbeFactory = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        wrong = f"{PROBE_ENV}={name!r} names no probe ({exc}): expected auto, "
        return lambda _device: NoProbe(wrong + f"{', '.join(PROBES)} or module:factory")
    return factory
