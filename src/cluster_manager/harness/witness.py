"""The harness's own clock around every timed call a worker reports.

A worker runs the submission, so the duration it reports could be forged from inside (its
timer, its step, its reply). The harness process times each call from outside as well, from
sending `run` to receiving the duration: that window holds the real call plus the way there and
back ("slack" is the window minus the report). Right after, it times the way there and back to
a trusted echo process that never sees the submission, so load on the machine shows in both.

In ranked runs the harness then asks for the output at once and times its arrival too: work
finished after the call returned must fit in what sending the output honestly takes (timed
here on the case's first output), plus the echo.

Load delays single replies at random, and a busy worker waits longer for a core than the idle
echo, so the verdict is on means without the highest tenth, against generous allowances:
reports of 1 ns for a call of a few milliseconds, and work moved off the clock wholesale, fail.
What a forgery can still hide unseen: half of each call plus `ECHO_FACTOR` slow round trips
and `SLACK_MARGIN_NS`: all of a call under a millisecond or two, more on a loaded host (and a
submission can load it).
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


@dataclass
class ClockWitness:
    baseline_ns: float = 0.0  # slack of honest, empty calls before the submission was imported
    transfer_ns: float = 0.0  # what sending one output takes, timed in the harness
    _slack: list[float] = field(default_factory=list)
    _reported: list[float] = field(default_factory=list)
    _echoes: list[float] = field(default_factory=list)
    _transfers: list[float] = field(default_factory=list)
    _impossible: int = 0

    def add_call(self, window_ns: float, reported_ns: float, echo_ns: float) -> None:
        """One timed call: the window seen here, the worker's duration and the echo's."""
        if reported_ns > window_ns * REPORT_TOLERANCE + REPORT_MARGIN_NS:
            self._impossible += 1
        self._slack.append(window_ns - reported_ns)
        self._reported.append(reported_ns)
        self._echoes.append(echo_ns)

    def add_transfer(self, elapsed_ns: float) -> None:
        """From asking for a timed call's output to having it here."""
        self._transfers.append(elapsed_ns)

    @property
    def _noise_ns(self) -> float:
        return ECHO_FACTOR * _quantile(self._echoes, ECHO_QUANTILE) + SLACK_MARGIN_NS

    @property
    def allowed_slack_ns(self) -> float:
        call = statistics.fmean(self._reported) if self._reported else 0.0
        return max(self.baseline_ns, 0.0) + self._noise_ns + SLACK_SHARE * call

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
