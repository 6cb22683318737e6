"""A phase's samples summed up as the RunResult carries them (core.telemetry)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from cluster_manager.core.telemetry import QUANTITIES, THROTTLE_REASONS, PhaseTelemetry, Spread
from cluster_manager.telemetry.probes import GpuProbe, Sample


def spread(values: Sequence[float]) -> Spread:
    return Spread(
        min=round(min(values), 2),
        median=round(statistics.median(values), 2),
        max=round(max(values), 2),
    )


def summarise(
    probe: GpuProbe,
    samples: Sequence[Sample],
    *,
    device: str = "",
    interval_s: float = 0.0,
    error: str = "",
) -> PhaseTelemetry:
    """Min, median and max of each quantity the probe read, the share of samples with a
    throttle reason that counts against a run, and every reason seen."""
    if not samples:
        reason = probe.unavailable_reason or error or "no sample was taken (the phase was short)"
        return PhaseTelemetry(probe=probe.name, device=device, unavailable=reason)
    quantities = {}
    for name in QUANTITIES:
        values = [v for s in samples if (v := getattr(s, name)) is not None]
        if values:
            quantities[name] = spread(values)
    throttled = sum(1 for s in samples if s.reasons & THROTTLE_REASONS)
    return PhaseTelemetry(
        probe=probe.name,
        device=device,
        samples=len(samples),
        interval_s=interval_s,
        quantities=quantities,
        throttled_share=round(throttled / len(samples), 4),
        reasons=tuple(sorted(set().union(*(s.reasons for s in samples)))),
        unavailable=error,
    )
