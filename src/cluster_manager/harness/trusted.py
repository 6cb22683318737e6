"""A timed case's score: never lower than the harness's own clock says the calls took.

The submission's process reports how long each call took, and it could report anything. So the
harness times every call from outside, from the moment the first input leaves to the moment the
last output arrives (the call's *window*). Right before or after it (a coin's toss), while
every process of the submission is stopped, the trusted stand-in takes the same inputs and
sends an output of the same size the same way, with no kernel to run: what moving the call's
data takes now (its *overhead*). A call's trusted duration is its window less that overhead.

A case's figures are the reports', raised as a whole to the trusted durations' median where
that is higher. A forged report cannot beat the clock: the clock's median is a floor under
every score. An honest report is the precise figure (the worker's clock sits right
around the call; the window also holds two processes' wake-ups), and where noise pushes the
clock above it, the clock's median counts: a disagreement costs precision, never a verdict.

Why the clock cannot be bent: the window is measured here, around everything the submission
does for the call (its processes are stopped before and after it, so no work moves outside
it), and the overhead is measured while none of them runs, by processes they cannot slow,
signal or reschedule (`guard.py`). The one thing the reports set is how long the stand-in
waits (`typical_report_ns`), which its own clock takes back out of the overhead.

A report is held against its window only to catch what cannot happen honestly: a call
reported longer than the window that contains it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from cluster_manager.harness import timing

# Pairs a case takes even past its budget where the phase has time to spare: with fewer, one
# preempted call moves the clock's median by its whole delay.
MIN_PAIRS = 10
# The stand-in's wait follows this many recent reports: enough that one odd call does not move
# it, few enough to follow a kernel that changes pace.
WAIT_CALLS = 31
# A report may not exceed the window that contains it; a GPU's event clock and the host's
# differ by a little (events resolve about half a microsecond).
REPORT_TOLERANCE = 1.01
REPORT_MARGIN_NS = 5_000.0


@dataclass
class TrustedClock:
    """The trusted durations of a case's timed calls, and the reports that cannot be true."""

    durations: list[float] = field(default_factory=list)
    reported: list[float] = field(default_factory=list)
    impossible: int = 0

    def add(
        self, *, window_ns: float, overhead_ns: float, reported_ns: float, report_window_ns: float
    ) -> float:
        """One call: its `window_ns` and the stand-in's `overhead_ns` for the same data, and
        rank 0's `reported_ns` with the window that held it (inputs sent to duration read).
        Returns the call's trusted duration: never below zero, since no call takes less."""
        if reported_ns > report_window_ns * REPORT_TOLERANCE + REPORT_MARGIN_NS:
            self.impossible += 1
        trusted = max(window_ns - overhead_ns, 0.0)
        self.durations.append(trusted)
        self.reported.append(reported_ns)
        return trusted

    @property
    def typical_report_ns(self) -> float:
        """The median of the last `WAIT_CALLS` reports: how long the stand-in waits in its
        replays, so the harness waits on it as on a call. A report forged low shortens the
        replay's wait, and so the overhead, and raises the clock; one forged high raises the
        reports' own mean, which is a floor of the score too."""
        recent = self.reported[-WAIT_CALLS:]
        return statistics.median(recent) if recent else 0.0

    def problem(self) -> str | None:
        if not self.impossible:
            return None
        return (
            f"the submission's process reported {self.impossible} call(s) longer than the "
            "harness saw them take: its timings were not measured honestly"
        )

    @property
    def clock_ns(self) -> float:
        """The median of the trusted durations. A preempted harness, worker or stand-in moves
        one call by up to a time slice, up or down, and moving data varies with two
        processes' wake-ups: the median follows the body of the calls, where a mean would
        follow the tail. No submission can lower it: each call's output needs that call's own
        work (its inputs are fresh and unforeseeable), so most calls cannot be quicker than
        that work."""
        return statistics.median(self.durations) if self.durations else 0.0

    def stats(self) -> timing.Stats:
        """The case's figures: the reports', raised as a whole to the clock's median where
        that is higher; every call counted in `runs`."""
        reported = timing.calculate_stats(self.reported)
        lift = max(0.0, self.clock_ns - reported.mean)
        return replace(
            reported,
            mean=reported.mean + lift,
            best=reported.best + lift,
            worst=reported.worst + lift,
        )
