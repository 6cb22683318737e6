"""AMD GPUs through AMD SMI (`amdsmi`, which ROCm installs; imported when the probe opens).

The library's dictionaries have changed keys between ROCm releases ("clk" / "cur_clk",
"current_socket_power" / "average_socket_power"): each reading takes the first key present.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from cluster_manager.telemetry.probes import GpuProbe, NoProbe, Sample

NAME = "AMD SMI"
# Bits of `indep_throttle_status` in the GPU metrics (the amdgpu driver's SMU throttler
# bits): 0-15 package power limits, 16-31 current limits, 32-47 temperatures, 48-63 others
# (49: PROCHOT of the GPU, a thermal brake).
_POWER_BITS = range(0, 16)
_CURRENT_BITS = range(16, 32)
_THERMAL_BITS = (*range(32, 48), 49)


def reasons_of(mask: int) -> frozenset[str]:
    found = set()
    for name, bits in (
        ("power_limit", _POWER_BITS),
        ("current_limit", _CURRENT_BITS),
        ("thermal_limit", _THERMAL_BITS),
    ):
        if any(mask >> bit & 1 for bit in bits):
            found.add(name)
    return frozenset(found)


class AmdSmiProbe:
    name = NAME
    unavailable_reason = ""

    def __init__(self, smi: Any, handle: Any) -> None:
        self._smi = smi
        self._handle = handle

    def describe(self) -> str:
        info = _maybe(lambda: self._smi.amdsmi_get_gpu_asic_info(self._handle)) or {}
        return str(info.get("market_name", ""))

    def sample(self) -> Sample:
        smi, handle = self._smi, self._handle
        gfx = _maybe(lambda: smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType.GFX)) or {}
        mem = _maybe(lambda: smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType.MEM)) or {}
        power = _maybe(lambda: smi.amdsmi_get_power_info(handle)) or {}
        metrics = _maybe(lambda: smi.amdsmi_get_gpu_metrics_info(handle)) or {}
        temperature = _maybe(
            lambda: smi.amdsmi_get_temp_metric(
                handle, smi.AmdSmiTemperatureType.HOTSPOT, smi.AmdSmiTemperatureMetric.CURRENT
            )
        )
        mask = _first(metrics, "indep_throttle_status")
        return Sample(
            sm_clock_mhz=_first(gfx, "clk", "cur_clk"),
            sm_clock_max_mhz=_first(gfx, "max_clk"),
            mem_clock_mhz=_first(mem, "clk", "cur_clk"),
            mem_clock_max_mhz=_first(mem, "max_clk"),
            temperature_c=_number(temperature),
            power_w=_first(power, "current_socket_power", "average_socket_power", "socket_power"),
            power_limit_w=_first(power, "power_limit"),
            reasons=reasons_of(int(mask or 0)),
        )

    def close(self) -> None:
        _maybe(self._smi.amdsmi_shut_down)


def open_amdsmi(device: str | None) -> GpuProbe:
    """A probe of `device` (an index as HIP_VISIBLE_DEVICES names it; None: the first), or a
    NoProbe saying why AMD SMI cannot read it."""
    try:
        import amdsmi
    except (ImportError, OSError, KeyError) as exc:  # it loads libamd_smi.so on import
        return NoProbe(f"AMD SMI unavailable: {type(exc).__name__}: {exc}")
    try:
        amdsmi.amdsmi_init()
        handles = amdsmi.amdsmi_get_processor_handles()
    except Exception as exc:
        return NoProbe(f"AMD SMI unavailable: {exc}")
    index = int(device) if device is not None and device.isdigit() else 0
    if index >= len(handles):
        _maybe(amdsmi.amdsmi_shut_down)
        return NoProbe(f"AMD SMI unavailable: no GPU {index} (it sees {len(handles)})")
    return AmdSmiProbe(amdsmi, handles[index])


def _first(values: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        if (number := _number(values.get(key))) is not None:
            return number
    return None


def _number(value: Any) -> float | None:
    """The library answers "N/A" (or a dict with a "value") where others answer a number."""
    if isinstance(value, Mapping):
        value = value.get("value")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _maybe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:
        return None
