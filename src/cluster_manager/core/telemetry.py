"""What the GPU did while a run was timed, as the RunResult carries it, and what that means
for a ranked score.

The runner samples the run's device during the phases that time kernels (`SAMPLED_MODES`) and
sums each phase up in a `PhaseTelemetry`. A GPU that slowed its clocks for heat or power while
a score was measured gives an unfair score: past a share of such samples (the operator's
threshold, applied by the bot) a ranked run is stored but not ranked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SAMPLED_MODES = ("benchmark", "leaderboard")
RANKED_MODE = "leaderboard"
NO_PROBE = "none"
# A ranked run whose GPU throttled in more of its samples than this is not ranked.
DEFAULT_THROTTLE_THRESHOLD = 0.05

# Clock-throttle reasons, named alike for every vendor's probe. Only these count against a
# run: idling, application clocks or sync boost are not the machine slowing a kernel down.
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "thermal_limit"})
POWER_REASONS = frozenset(
    {"sw_power_cap", "hw_power_brake_slowdown", "power_limit", "current_limit"}
)
HARDWARE_REASONS = frozenset({"hw_slowdown"})  # the hardware's own brake: heat or power
THROTTLE_REASONS = THERMAL_REASONS | POWER_REASONS | HARDWARE_REASONS

# The sampled quantities, each summed up as a `Spread` when the probe could read it.
QUANTITIES = (
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "mem_clock_mhz",
    "mem_clock_max_mhz",
    "temperature_c",
    "power_w",
    "power_limit_w",
)


@dataclass(frozen=True)
class Spread:
    min: float
    median: float
    max: float


@dataclass(frozen=True)
class PhaseTelemetry:
    """One phase's samples of its GPU, summed up; `samples == 0` says why in `unavailable`."""

    probe: str  # "NVML", "AMD SMI", or NO_PROBE
    device: str = ""
    samples: int = 0
    interval_s: float = 0.0
    quantities: dict[str, Spread] = field(default_factory=dict)
    # Share of the samples with a thermal, power or hardware slowdown among their reasons.
    throttled_share: float = 0.0
    reasons: tuple[str, ...] = ()  # every clock-throttle reason seen, sorted
    unavailable: str = ""  # why nothing was sampled (no GPU, no driver), or why sampling stopped

    @classmethod
    def none(cls, reason: str) -> PhaseTelemetry:
        return cls(probe=NO_PROBE, unavailable=reason)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PhaseTelemetry:
        return cls(
            probe=str(data.get("probe", NO_PROBE)),
            device=str(data.get("device", "")),
            samples=int(data.get("samples", 0)),
            interval_s=float(data.get("interval_s", 0.0)),
            quantities={
                name: Spread(float(s["min"]), float(s["median"]), float(s["max"]))
                for name, s in dict(data.get("quantities", {})).items()
            },
            throttled_share=float(data.get("throttled_share", 0.0)),
            reasons=tuple(data.get("reasons", ())),
            unavailable=str(data.get("unavailable", "")),
        )


def telemetry_from_json(data: Mapping[str, Any] | None) -> dict[str, PhaseTelemetry]:
    """A RunResult's `telemetry`; results of runners that did not sample have none."""
    return {name: PhaseTelemetry.from_json(phase) for name, phase in (data or {}).items()}


def throttle_kinds(reasons: tuple[str, ...]) -> list[str]:
    kinds = [
        ("thermal", THERMAL_REASONS),
        ("power", POWER_REASONS),
        ("hardware slowdown", HARDWARE_REASONS),
    ]
    return [kind for kind, names in kinds if names.intersection(reasons)]


def throttling(telemetry: Mapping[str, PhaseTelemetry], threshold: float) -> str | None:
    """Why the ranked phase's timings are unfair: its GPU throttled in more than `threshold`
    (a share) of the samples; None when it did not, or nothing was sampled."""
    phase = telemetry.get(RANKED_MODE)
    if phase is None or phase.samples == 0 or phase.throttled_share <= threshold:
        return None
    kinds = ", ".join(throttle_kinds(phase.reasons)) or "throttled"
    return f"the GPU throttled in {_percent(phase.throttled_share)} of the samples ({kinds})"


def summary_line(telemetry: Mapping[str, PhaseTelemetry]) -> str | None:
    """One line for reports: the timed phase's clock, temperature and power ranges, e.g.
    "GPU: SM clock 1755–1980 MHz, 61–74 °C, 412–698 W (NVML, 143 samples)"; None when
    nothing was sampled (a CPU run)."""
    phase = next(
        (telemetry[m] for m in reversed(SAMPLED_MODES) if m in telemetry and telemetry[m].samples),
        None,
    )
    if phase is None:
        return None
    parts = [
        f"{label}{_range(phase.quantities[name])}{unit}"
        for name, label, unit in (
            ("sm_clock_mhz", "SM clock ", " MHz"),
            ("temperature_c", "", " °C"),
            ("power_w", "", " W"),
        )
        if name in phase.quantities
    ]
    if phase.throttled_share > 0:
        kinds = ", ".join(throttle_kinds(phase.reasons))
        parts.append(f"throttled in {_percent(phase.throttled_share)} ({kinds})")
    source = f"({phase.probe}, {phase.samples} samples)"
    return f"GPU: {', '.join(parts)} {source}" if parts else f"GPU: {source}"


def _range(spread: Spread) -> str:
    low, high = round(spread.min), round(spread.max)
    return str(low) if low == high else f"{low}–{high}"


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"
