"""The harness's own clock around every timed call a worker reports.

A worker runs the submission, so the duration it reports could be forged from inside (its
timer, its step, its reply). The harness process times each call from outside as well, from
sending `run` to receiving the duration: that window holds the real call plus the way there and
back ("slack" is the window minus the report). Right after, it times the way there and back to
a trusted echo process that never sees the submission, so load on the machine shows in both.

In ranked runs the worker sends the output right after the duration, unasked, and the harness
times how long after the duration it arrives: work finished after the reported call shows as an
output that comes later than sending it honestly takes (timed in trusted processes on the
case's first output).

Two uses of that clock:
- Verdict: reports that leave far more time unexplained than load can (`problem`) fail the run.
  Load delays single replies at random, and a busy worker waits longer for a core than the idle
  echo, so this is on means without the highest tenth, against generous allowances.
- Ranked durations (`shortfall_ns`): their mean is held to the mean of the harness's windows
  less a calibration call's slack and timer, the calibration's allowance and `CALL_SHARE` of
  the call, without the `SPIKE_SHARE` of calls the harness saw exceed their report most (a
  preempted harness or worker around the call, not the kernel). On means, so honest noise
  either way cancels out instead of only ever adding. Work that arrived late is added back
  beyond the same allowance, `CALL_SHARE` and `TRANSFER_SHARE` of sending the output
  (`hidden_after_timer_ns`). The allowances are fixed before the timed loop or scale with the
  reports themselves, so whatever a submission forges, its mean ranked duration falls short of
  the real one by at most `Calibration.allowance_ns` (20 to 200 µs) and `CALL_SHARE` +
  `SPIKE_SHARE` of the call, and by as much again plus `TRANSFER_SHARE` of sending the output
  if it also moves work past its reply. Honest means stay as reported unless load delays the
  harness's view of the calls by more than that on average.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

# What the slack may reach beyond the calibration: on a loaded CPU host an honest
# multi-threaded torch kernel's reply waits for cores its own threads hold (9 % to 38 % of
# 6-12 ms calls measured with three runs sharing two cores), several ranks start after a
# barrier that waits for each to be scheduled (up to 30 % of a 2 ms all-reduce), and a busy
# worker waits for a core longer than the idle echo (up to 300 µs more with four runs on two
# cores).
SLACK_SHARE = 0.5
ECHO_FACTOR = 3.0
SLACK_MARGIN_NS = 500_000.0
# A loaded host delays some replies by milliseconds (2.3 ms on average for a 30 µs call, seen
# with the whole test suite running on two cores): the allowance follows the echo's slow
# tail, not its typical round trip. A submission that loads the machine widens it too.
ECHO_QUANTILE = 0.9
# Load slows sending an output more than the estimate taken once at the start of the case.
TRANSFER_FACTOR = 5.0
# The floor under ranked durations: honest calls' slack strays this many times its spread
# (90th percentile minus median) above the median, within a floor and a cap.
NOISE_FACTOR = 2.0
SPREAD_QUANTILE = 0.9
ALLOWANCE_FLOOR_NS = 20_000.0
ALLOWANCE_CAP_NS = 200_000.0
# What an honest output's arrival may exceed the estimate by, as a share of it, before the
# rest counts as work done after the call: encoding and copying vary more than a round trip.
TRANSFER_SHARE = 0.25
# After a long call the harness's view of the reply and the output lags a little more (about
# 0.6 % of 10 ms busy calls on a quiet two-core VM): what it may exceed, as a share of the call.
CALL_SHARE = 0.01
# The calls whose window exceeds the report most are left as reported: a preempted harness or
# worker around the call (2-4 ms on a quiet VM, a few in 3,500 calls) is not the kernel's time.
SPIKE_SHARE = 0.02
# The highest tenth of samples are load spikes an honest run cannot avoid.
TRIM = 0.1
# A reported duration may not exceed the window that contains it (clocks differ a little).
REPORT_TOLERANCE = 1.01
REPORT_MARGIN_NS = 5_000.0


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def trimmed_mean(values: list[float]) -> float:
    """The mean without the highest `TRIM` of the values."""
    kept = sorted(values)[: max(1, round(len(values) * (1 - TRIM)))]
    return statistics.fmean(kept)


@dataclass(frozen=True)
class Calibration:
    """Honest timed calls of our own, measured before any worker imported the submission."""

    slack_ns: float = 0.0  # what the witness sees beyond a report: the way there and back
    timer_ns: float = 0.0  # what the timer itself adds to every call it reports
    spread_ns: float = 0.0  # how far honest slack strays above its median (p90 - median)

    @classmethod
    def of_calls(
        cls, *, empty: list[float], busy: list[tuple[float, float]], timer: bool
    ) -> Calibration:
        """`empty`: the reports of empty calls, the timer's own cost (one rank; with several
        ranks they are a barrier, part of what their timings mean: `timer` False). `busy`:
        windows and reports of calls that wait a while, as real ones do."""
        slack = [window - reported for window, reported in busy]
        median = statistics.median(slack)
        return cls(
            slack_ns=median,
            timer_ns=statistics.median(empty) if timer else 0.0,
            spread_ns=_quantile(slack, SPREAD_QUANTILE) - median,
        )

    @property
    def allowance_ns(self) -> float:
        """How far a ranked duration may fall short of the harness's clock."""
        return min(ALLOWANCE_CAP_NS, max(ALLOWANCE_FLOOR_NS, NOISE_FACTOR * self.spread_ns))


@dataclass
class ClockWitness:
    calibration: Calibration = field(default_factory=Calibration)
    transfer_ns: float = 0.0  # what sending the case's outputs takes, timed in trusted processes
    transfer_bytes: int = 0  # their size encoded: later outputs are measured against it
    _windows: list[float] = field(default_factory=list)
    _slack: list[float] = field(default_factory=list)
    _reported: list[float] = field(default_factory=list)
    _echoes: list[float] = field(default_factory=list)
    _transfers: list[float] = field(default_factory=list)
    _late: list[float] = field(default_factory=list)
    _impossible: int = 0

    def add_call(self, window_ns: float, reported_ns: float, echo_ns: float) -> None:
        """One timed call: the window seen here, the worker's duration and the echo's."""
        if reported_ns > window_ns * REPORT_TOLERANCE + REPORT_MARGIN_NS:
            self._impossible += 1
        self._windows.append(window_ns)
        self._slack.append(window_ns - reported_ns)
        self._reported.append(reported_ns)
        self._echoes.append(echo_ns)

    def add_transfer(self, elapsed_ns: float, size: int) -> None:
        """From a timed call's duration to its outputs here, and their size. A smaller output
        than the first is expected to arrive sooner, in proportion."""
        self._transfers.append(elapsed_ns)
        share = min(1.0, size / self.transfer_bytes) if self.transfer_bytes else 1.0
        self._late.append(elapsed_ns - self.transfer_ns * share)

    def shortfall_ns(self) -> float:
        """How far the mean of the reported durations (less the timer's cost) falls short of
        the harness's clock: each call's window less the calibrated slack and timer, the
        allowance and `CALL_SHARE` of the call, averaged without the `SPIKE_SHARE` of calls
        that exceed it most."""
        timer, slack = self.calibration.timer_ns, self.calibration.slack_ns
        allowance = self.calibration.allowance_ns
        excess = sorted(
            window - slack - timer - allowance - (1 + CALL_SHARE) * max(reported - timer, 0.0)
            for window, reported in zip(self._windows, self._reported, strict=True)
        )
        kept = excess[: len(excess) - int(len(excess) * SPIKE_SHARE)]
        return max(0.0, statistics.fmean(kept)) if kept else 0.0

    def hidden_after_timer_ns(self) -> float:
        """Work each call moved past its reply, as far as the outputs' arrival shows it beyond
        what load and copying explain: ranked durations get it back."""
        if not self._late:
            return 0.0
        call = statistics.fmean(self._reported) if self._reported else 0.0
        allowed = (
            self.calibration.allowance_ns + TRANSFER_SHARE * self.transfer_ns + CALL_SHARE * call
        )
        return max(0.0, statistics.median(self._late) - allowed)

    @property
    def _noise_ns(self) -> float:
        return ECHO_FACTOR * _quantile(self._echoes, ECHO_QUANTILE) + SLACK_MARGIN_NS

    @property
    def allowed_slack_ns(self) -> float:
        call = statistics.fmean(self._reported) if self._reported else 0.0
        return max(self.calibration.slack_ns, 0.0) + self._noise_ns + SLACK_SHARE * call

    @property
    def allowed_transfer_ns(self) -> float:
        return TRANSFER_FACTOR * self.transfer_ns + self._noise_ns

    def problem(self) -> str | None:
        """Why the reported durations cannot be the real ones, if they cannot."""
        if self._impossible:
            return (
                f"the submission's process reported {self._impossible} call(s) longer than "
                "the harness saw them take: its timings were not measured honestly"
            )
        if self._slack and trimmed_mean(self._slack) > self.allowed_slack_ns:
            return (
                f"each timed call took {trimmed_mean(self._slack) / 1e3:.0f} µs longer by the "
                "harness's clock than the submission's process reported (the way there and "
                f"back explains at most {self.allowed_slack_ns / 1e3:.0f} µs): the timer was "
                "changed or work was hidden from it"
            )
        if self._transfers and trimmed_mean(self._transfers) > self.allowed_transfer_ns:
            return (
                f"each timed call's output took {trimmed_mean(self._transfers) / 1e3:.0f} µs "
                f"to arrive (sending it takes at most {self.allowed_transfer_ns / 1e3:.0f} µs):"
                " work was finished after the timer stopped"
            )
        return None
