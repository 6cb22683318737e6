"""The timing loop: warm-up, one timed call at a time, stop on noise rather than on a count.

Measurement is kept apart from reporting: `measure` returns `Stats` (nanoseconds), and the
stopping rule is a plain object that can be swapped (nvbench / do_bench style). The timers run
where the kernel runs (the harness's worker); the loop and the rule run in the harness.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Bound before any submission is imported, so patching `time` later cannot touch our clock.
_perf_counter_ns = time.perf_counter_ns


@dataclass(frozen=True)
class Stats:
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float


def calculate_stats(durations: Sequence[float]) -> Stats:
    runs = len(durations)
    if runs == 0:
        raise ValueError("no durations")
    mean = sum(durations) / runs
    std = math.sqrt(sum((d - mean) ** 2 for d in durations) / (runs - 1)) if runs > 1 else 0.0
    return Stats(
        runs=runs,
        mean=mean,
        std=std,
        err=std / math.sqrt(runs),
        best=float(min(durations)),
        worst=float(max(durations)),
    )


class RunningMoments:
    """Count, mean and spread of the samples so far, updated in O(1) per sample (Welford), so
    deciding whether to stop costs the same at the 5,000th call as at the third."""

    def __init__(self) -> None:
        self.runs = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, sample: float) -> None:
        self.runs += 1
        delta = sample - self.mean
        self.mean += delta / self.runs
        self._m2 += delta * (sample - self.mean)

    @property
    def err(self) -> float:
        """Standard error of the mean."""
        if self.runs < 2:
            return 0.0
        return math.sqrt(max(self._m2, 0.0) / (self.runs - 1) / self.runs)


@dataclass(frozen=True)
class StopRule:
    """Stop when the standard error of the mean is small enough, within count and time bounds.
    `floor_runs` calls are taken even past the wall budget, up to `floor_budget_ns`, or past
    that too while the whole floor takes no more than `floor_grace_ns` at the pace so far:
    the clock's median needs that many (`trusted.MIN_PAIRS`), and quick
    calls cost next to nothing."""

    target_rel_err: float = 0.001
    min_runs: int = 3
    max_runs: int = 10_000
    wall_budget_ns: float = 10e9
    floor_runs: int = 0
    floor_budget_ns: float = 0.0
    floor_grace_ns: float = 0.0

    def should_stop(self, moments: RunningMoments, wall_ns: float) -> bool:
        if moments.runs < self.floor_runs and (
            wall_ns < self.floor_budget_ns or self._floor_is_quick(moments, wall_ns)
        ):
            return False
        if moments.runs >= self.max_runs or wall_ns >= self.wall_budget_ns:
            return True
        if moments.runs < self.min_runs:
            return False
        return moments.mean > 0 and moments.err / moments.mean < self.target_rel_err

    def _floor_is_quick(self, moments: RunningMoments, wall_ns: float) -> bool:
        return moments.runs > 0 and wall_ns / moments.runs * self.floor_runs <= self.floor_grace_ns


class Timer(Protocol):
    """Times one call. `start`/`stop` bracket the call; `stop` waits for the device."""

    def start(self) -> None: ...

    def stop(self) -> float: ...


class CpuTimer:
    def __init__(
        self,
        synchronize: Callable[[], None] = lambda: None,
        clock: Callable[[], int] = _perf_counter_ns,  # bound now: immune to patching the module
    ) -> None:
        self._synchronize = synchronize
        self._clock = clock
        self._t0 = 0

    def start(self) -> None:
        self._synchronize()
        self._t0 = self._clock()

    def stop(self) -> float:
        self._synchronize()
        return float(self._clock() - self._t0)


class CudaEventTimer:
    """CUDA/HIP events around the call, after flushing the last-level cache."""

    FLUSH_BYTES = 256 * 1024 * 1024

    def __init__(self, torch: Any, synchronize: Callable[[], None] | None = None) -> None:
        # `synchronize`: torch's own, taken before a submission could replace it.
        self._synchronize = synchronize or torch.cuda.synchronize
        self._flush = torch.empty(self.FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        self._begin = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._synchronize()
        self._flush.zero_()
        # The flush finished before the call begins: nothing queued before the call (a side
        # stream's work) runs under the flush, unseen.
        self._synchronize()
        self._begin.record()

    def stop(self) -> float:
        self._end.record()
        self._synchronize()
        return float(self._begin.elapsed_time(self._end)) * 1e6  # ms -> ns


def measure(
    step: Callable[[int], float],
    rule: StopRule,
    *,
    clock: Callable[[], int] = _perf_counter_ns,
) -> Stats:
    """Runs `step(i)` (one timed call, returning its duration in ns, with whatever it does
    untimed around it) until `rule` says stop. A step stops the measurement by raising."""
    durations: list[float] = []
    moments = RunningMoments()
    began = clock()
    while True:
        duration = step(len(durations))
        durations.append(duration)
        moments.add(duration)
        if rule.should_stop(moments, clock() - began):
            return calculate_stats(durations)


def warm_up(
    call: Callable[[], Any],
    synchronize: Callable[[], None],
    *,
    min_calls: int = 3,
    budget_ns: float = 50e6,
    clock: Callable[[], int] = _perf_counter_ns,
) -> int:
    """Calls until both `min_calls` and `budget_ns` are reached (JITs, caches, clocks settle)."""
    began = clock()
    calls = 0
    while calls < min_calls or clock() - began < budget_ns:
        call()
        synchronize()
        calls += 1
        if calls >= 1000:
            break
    return calls


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """No garbage collection stalls this process inside a timed call's window (a full one
    takes milliseconds once torch is loaded): what is alive now is frozen out of collections,
    which wait until the measurement is over."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
