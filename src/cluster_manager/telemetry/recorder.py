"""A run's telemetry: the probe opened at its first timed phase, each timed phase sampled,
the probe closed when the run ends."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cluster_manager.core.telemetry import SAMPLED_MODES, PhaseTelemetry
from cluster_manager.telemetry.probes import GpuProbe, NoProbe, ProbeFactory
from cluster_manager.telemetry.sampler import INTERVAL_S, Sampler
from cluster_manager.telemetry.summary import summarise


class RunTelemetry:
    """`with telemetry.phase(mode):` around each phase; `phases` then holds the timed ones'
    summaries (test and script phases are not sampled: they time nothing)."""

    def __init__(
        self, factory: ProbeFactory, device: str | None = None, interval_s: float = INTERVAL_S
    ) -> None:
        self.phases: dict[str, PhaseTelemetry] = {}
        self._factory = factory
        self._device = device
        self._interval_s = interval_s
        self._probe: GpuProbe | None = None
        self._device_name = ""

    @contextlib.contextmanager
    def phase(self, mode: str) -> Iterator[None]:
        if mode not in SAMPLED_MODES:
            yield
            return
        probe = self._open()
        if probe.unavailable_reason:
            yield
            self.phases[mode] = PhaseTelemetry.none(probe.unavailable_reason)
            return
        with Sampler(probe, self._interval_s) as sampler:
            yield
        self.phases[mode] = summarise(
            probe,
            sampler.samples,
            device=self._device_name,
            interval_s=self._interval_s,
            error=sampler.error,
        )

    def close(self) -> None:
        if self._probe is not None:
            with contextlib.suppress(Exception):
                self._probe.close()
            self._probe = None

    def _open(self) -> GpuProbe:
        if self._probe is None:
            try:
                self._probe = self._factory(self._device)
                self._device_name = self._probe.describe()
            except Exception as exc:  # a probe's own failure never fails the run
                self._probe = NoProbe(f"the GPU probe failed to open: {exc!r}")
        return self._probe
