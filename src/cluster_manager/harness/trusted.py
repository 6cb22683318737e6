"""A timed case's score: never lower than the harness's own clock says the calls took.

The submission's process reports how long each call took, and it could report anything. So the
harness times every call from outside, from the moment the first input leaves to the moment the
last output arrives (the call's *window*). Right before or after it (a coin's toss), while
every process of the submission is stopped, the trusted stand-in takes the same inputs and
sends an output of the same size the same way, with no kernel to run: what moving the call's
data takes now (its *overhead*). A call's trusted duration is its window less that overhead.

A case's figures are those of the reports or of the trusted durations (trimmed: `TRIM_SHARE`),
whichever mean is higher. A forged report cannot beat the clock: the clock's mean is a floor
under every score. An honest report is the precise figure (the worker's clock sits right
around the call; the window also holds two processes' wake-ups), and where noise pushes the
clock above it, the clock's mean counts: a disagreement costs precision, never a verdict.

Why the clock cannot be bent: the window is measured here, around everything the submission
does for the call (its processes are stopped before and after it, so no work moves outside
it), and the overhead is measured while none of them runs, by processes they cannot slow,
signal or reschedule (`guard.py`). Neither depends on anything the submission says.

A report is held against its window only to catch what cannot happen honestly: a call
reported longer than the window that contains it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cluster_manager.harness import timing

# A preempted harness, worker or stand-in stretches one call's window or one replay by up to a
# time slice (milliseconds on a loaded machine), up or down: the clock's mean leaves out this
# share of the calls at each end. Nothing the submission controls decides which calls are left
# out but its real time per call (inputs are fresh each call: slow calls cannot speed others).
TRIM_SHARE = 0.1
# Pairs a case takes even past its budget where the phase has time to spare: with fewer, the
# trim leaves nothing out, and one preempted call moves the score by its whole delay.
MIN_PAIRS = 10
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
    def last_ns(self) -> float:
        return self.durations[-1] if self.durations else 0.0

    def problem(self) -> str | None:
        if not self.impossible:
            return None
        return (
            f"the submission's process reported {self.impossible} call(s) longer than the "
            "harness saw them take: its timings were not measured honestly"
        )

    @property
    def clock_ns(self) -> float:
        """The trimmed mean of the trusted durations."""
        return timing.calculate_stats(trimmed(self.durations)).mean

    def stats(self) -> timing.Stats:
        """The case's figures: the reports', or the trusted durations' (over the calls kept
        by the trim) where their mean is higher; every call counted in `runs`."""
        reported = timing.calculate_stats(self.reported)
        clock = timing.calculate_stats(trimmed(self.durations))
        return replace(clock if clock.mean > reported.mean else reported, runs=len(self.reported))


def trimmed(values: list[float], share: float = TRIM_SHARE) -> list[float]:
    """`values` without the `share` of them at each end (in order of size), and without one
    at each end at least where there are three or more (a median of three)."""
    cut = max(int(len(values) * share), 1 if len(values) >= 3 else 0)
    ordered = sorted(values)
    return ordered[cut : len(ordered) - cut] if cut else ordered
