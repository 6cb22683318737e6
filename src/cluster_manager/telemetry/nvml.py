"""NVIDIA GPUs through NVML (`nvidia-ml-py`, imported as `pynvml` when the probe opens)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster_manager.telemetry.probes import GpuProbe, NoProbe, Sample

NAME = "NVML"
# nvmlClocksThrottleReason* bits (stable across driver versions) and their common names.
REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks",
}


def reasons_of(mask: int) -> frozenset[str]:
    return frozenset(name for bit, name in REASON_BITS.items() if mask & bit)


class NvmlProbe:
    name = NAME
    unavailable_reason = ""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle
        # Maxima and the power limit hardly change within a run: read once, not per sample.
        self._sm_max = _maybe(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
        self._mem_max = _maybe(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
        limit_mw = _maybe(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        self._power_limit = None if limit_mw is None else limit_mw / 1000

    def describe(self) -> str:
        name = _maybe(lambda: self._nvml.nvmlDeviceGetName(self._handle))
        return name.decode() if isinstance(name, bytes) else str(name or "")

    def sample(self) -> Sample:
        nvml, handle = self._nvml, self._handle
        power_mw = _maybe(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        mask = _maybe(lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        return Sample(
            sm_clock_mhz=_maybe(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            sm_clock_max_mhz=self._sm_max,
            mem_clock_mhz=_maybe(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            mem_clock_max_mhz=self._mem_max,
            temperature_c=_maybe(
                lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            ),
            power_w=None if power_mw is None else power_mw / 1000,
            power_limit_w=self._power_limit,
            reasons=reasons_of(mask or 0),
        )

    def close(self) -> None:
        _maybe(self._nvml.nvmlShutdown)


def open_nvml(device: str | None) -> GpuProbe:
    """A probe of `device` (an index or a GPU UUID as CUDA_VISIBLE_DEVICES names it; None:
    the first), or a NoProbe saying why NVML cannot read it."""
    try:
        import pynvml
    except ImportError as exc:
        return NoProbe(f"NVML unavailable: nvidia-ml-py is not installed ({exc})")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return NoProbe(f"NVML unavailable: {exc}")
    try:
        if device is not None and not device.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByUUID(device)
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(device or 0))
    except pynvml.NVMLError as exc:
        _maybe(pynvml.nvmlShutdown)
        return NoProbe(f"NVML unavailable: device {device or 0}: {exc}")
    return NvmlProbe(pynvml, handle)


def _maybe(read: Callable[[], Any]) -> Any:
    """A reading, or None where this GPU or driver does not support it."""
    try:
        return read()
    except Exception:
        return None
