"""Samples a probe in a daemon thread of the runner while a phase runs.

The task's main runs in a child process; this thread only waits between a few driver calls,
so it costs the timed kernels nothing measurable. Stopping sets an Event the thread waits on:
it ends within one driver call, not one interval.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

from cluster_manager.telemetry.probes import GpuProbe, Sample

INTERVAL_S = 0.05  # 20 Hz: short kernels' phases still get a few dozen samples
JOIN_TIMEOUT_S = 2.0


class Sampler:
    """`with Sampler(probe) as sampler:` samples until the block ends; then `samples` holds
    them, `error` why sampling stopped early (the probe failed), `elapsed_s` how long it ran."""

    def __init__(self, probe: GpuProbe, interval_s: float = INTERVAL_S) -> None:
        self.probe = probe
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self.error = ""
        self.elapsed_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
        self._began = 0.0

    def __enter__(self) -> Sampler:
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(JOIN_TIMEOUT_S)
        self.elapsed_s = time.monotonic() - self._began

    def _loop(self) -> None:
        # Samples at fixed times, not fixed gaps: a slow driver call does not stretch the rate.
        due = time.monotonic()
        while not self._stop.is_set():
            try:
                self.samples.append(self.probe.sample())
            except Exception as exc:  # a device lost mid-run: keep what was sampled
                self.error = f"sampling stopped: {exc}"
                return
            # A driver call slower than the interval skips a beat rather than bunching up.
            due = max(due + self.interval_s, time.monotonic())
            self._stop.wait(due - time.monotonic())
