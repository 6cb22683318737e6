"""The harness's own clock around every timed call a worker reports.

A worker runs the submission, so the duration it reports could be forged from inside (its
timer, its step, its reply). The harness process times each call from outside as well: from
sending `run` (with the call's inputs, in ranked runs) to receiving the duration, and then the
output. That window holds the real call plus the way there and back ("slack" is the window
minus the report). Nothing here ever changes a reported duration: noise in the way there and
back must not reach a score. The clock only decides whether the reports can be true.

- Ranked runs (`PairedWitness`): right before or after each call, the stand-in (an
  undumpable process of the harness's that never imports the submission) takes the same
  inputs, waits as long as the submission reported, and sends an output of the same size,
  over the same kind of pipe. An honest call's slack and the stand-in's are the same up to
  noise; work moved off the clock (into taking the inputs, after the reply, or by a forged
  timer) shows as the submission's slack exceeding the stand-in's. Paired call by call, load
  drifts cancel. The run fails if the median of the differences passes a tolerance (10 µs, a
  small share of the call, or what the differences' own spread allows), by far or while more
  calls than chance allows exceed their replays, or if calls beyond it one way outnumber those
  beyond it the other way by more than chance.
- Other timed runs (`ClockWitness`): reports that leave far more time unexplained than load
  can fail the run (benchmark mode, and ranked cases on several ranks, whose barriers make
  the pairing unequal).
"""

from __future__ import annotations

import math
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
# Ranked calls against their replays: what the median excess may reach before the run fails.
# Honest medians measured on a two-core VM stay within about a µs of zero quiet, and within a
# few µs with another process keeping a core busy; a call's own jitter grows with it.
PAIRED_FLOOR_NS = 10_000.0
PAIRED_CALL_SHARE = 0.05
# Moving a call's data (inputs there, output back) varies with the state of two allocators:
# a share of what it takes the stand-in, tens to hundreds of µs for megabytes.
PAIRED_SLACK_SHARE = 0.10
PAIRED_Z = 4.0
# Pairs the median needs before it may convict: with one pair (a slow case on a loaded
# machine, in a short budget) a single preemption reads as hidden work. The timing loop takes
# this many, past its budget where the phase has time to spare (`timing.StopRule.floor_runs`);
# with fewer, only an excess beyond what moving the call's data takes the stand-in fails.
PAIRED_MIN_CALLS = 10
# Ranked: the most of a call that noise alone may excuse. On a heavily loaded machine four
# standard errors of the median grow past work a cheat hides (1 ms of a 3 ms call passed at a
# load of 6 on two cores): such a timing goes on for more pairs, whose error shrinks, and is
# not scored if it stays that noisy (`retiming.too_noisy`). Below a millisecond noise is
# allowed whatever the call: at a load of 16 on two cores honest 20-30 µs calls showed 260-520
# µs, and a machine that busy would refuse every quick kernel. Up to what moving the call's
# data takes the stand-in too: moving megabytes varies by milliseconds (honest softmax cases,
# 4-16 MiB each way on a quiet machine: 6-43 % of it with 11-180 pairs).
PAIRED_NOISE_SHARE = 0.25
PAIRED_NOISE_FLOOR_NS = 1_000_000.0
# With enough pairs a median less than `PAIRED_SIGN_BAND` times the tolerance convicts only if
# more calls than chance allows took longer than their replays (a one-sided sign test). Four
# standard errors estimated from ten or a dozen heavy-tailed differences (megabytes moved per
# call on a loaded machine) are passed by honest cases about once in 500 (simulated); with the
# sign test in the band, once in 2 000 to 20 000. Past the band the median convicts alone: at
# ten pairs the sign test needs all ten, and a preemption or two in a cheat's calls (1 ms
# hidden after each 2 ms report, under a loaded test suite) would let it pass.
PAIRED_SIGN_P = 0.01
PAIRED_SIGN_BAND = 2.0
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

    @classmethod
    def of_calls(
        cls, *, empty: list[float], busy: list[tuple[float, float]], timer: bool
    ) -> Calibration:
        """`empty`: the reports of empty calls, the timer's own cost (one rank; with several
        ranks they are a barrier, part of what their timings mean: `timer` False). `busy`:
        windows and reports of calls that wait a while, as real ones do."""
        slack = [window - reported for window, reported in busy]
        return cls(
            slack_ns=statistics.median(slack),
            timer_ns=statistics.median(empty) if timer else 0.0,
        )


@dataclass
class ClockWitness:
    """Timed calls without a stand-in: only reports far beyond what load explains fail."""

    calibration: Calibration = field(default_factory=Calibration)
    _slack: list[float] = field(default_factory=list)
    _reported: list[float] = field(default_factory=list)
    _echoes: list[float] = field(default_factory=list)
    _impossible: int = 0

    def add_call(self, window_ns: float, reported_ns: float, echo_ns: float) -> None:
        """One timed call: the window seen here, the worker's duration and a round trip to
        the stand-in right after."""
        if _impossible(window_ns, reported_ns):
            self._impossible += 1
        self._slack.append(window_ns - reported_ns)
        self._reported.append(reported_ns)
        self._echoes.append(echo_ns)

    @property
    def allowed_slack_ns(self) -> float:
        call = statistics.fmean(self._reported) if self._reported else 0.0
        noise = ECHO_FACTOR * _quantile(self._echoes, ECHO_QUANTILE) + SLACK_MARGIN_NS
        return max(self.calibration.slack_ns, 0.0) + noise + SLACK_SHARE * call

    def problem(self) -> str | None:
        """Why the reported durations cannot be the real ones, if they cannot."""
        if self._impossible:
            return _impossible_message(self._impossible)
        if self._slack and trimmed_mean(self._slack) > self.allowed_slack_ns:
            return (
                f"each timed call took {trimmed_mean(self._slack) / 1e3:.0f} µs longer by the "
                "harness's clock than the submission's process reported (the way there and "
                f"back explains at most {self.allowed_slack_ns / 1e3:.0f} µs): the timer was "
                "changed or work was hidden from it"
            )
        return None


@dataclass
class PairedWitness:
    """Each ranked call next to the stand-in's replay of it (see the module's docstring)."""

    calibration: Calibration = field(default_factory=Calibration)
    _before: list[float] = field(default_factory=list)  # excess up to the duration's reply
    _after: list[float] = field(default_factory=list)  # excess from there to the output
    _reported: list[float] = field(default_factory=list)
    _replay_slack: list[float] = field(default_factory=list)  # the replay's window less report
    _impossible: int = 0

    def add(
        self,
        call: tuple[float, float, float],
        replay: tuple[float, float, float],
    ) -> None:
        """A call and its replay, each as (window to the duration, duration reported, from
        there to the output), in ns."""
        window, reported, output = call
        replay_window, replay_reported, replay_output = replay
        if _impossible(window, reported):
            self._impossible += 1
        self._before.append((window - reported) - (replay_window - replay_reported))
        self._after.append(output - replay_output)
        self._reported.append(reported)
        self._replay_slack.append(replay_window - replay_reported + replay_output)

    @property
    def pairs(self) -> int:
        return len(self._before)

    def _excess(self) -> list[float]:
        """Each pair's excess: the call's slack beyond its replay's, both parts together."""
        return [b + a for b, a in zip(self._before, self._after, strict=True)]

    def hidden_ns(self) -> float:
        """How much longer the submission's calls took than their reports, beyond the
        stand-in's: the median over calls."""
        excess = self._excess()
        return statistics.median(excess) if excess else 0.0

    def tolerance_ns(self) -> float:
        """What honest noise can put between a call and its replay's median: a floor, a
        share of the call, a share of moving its data (the replay's own slack), or four
        standard errors of the median (robustly estimated); with too few pairs to estimate
        that error, all of moving the data."""
        if not self._before:
            return PAIRED_FLOOR_NS
        call = statistics.median(self._reported)
        moving = statistics.median(self._replay_slack)
        few = moving if self.pairs < PAIRED_MIN_CALLS else 0.0
        return max(
            PAIRED_FLOOR_NS,
            PAIRED_CALL_SHARE * call,
            PAIRED_SLACK_SHARE * moving,
            self.noise_ns(),
            few,
        )

    def noise_ns(self) -> float:
        """Four standard errors of the median excess, robustly estimated (from the median
        absolute deviation): what noise alone lets the median reach."""
        excess = self._excess()
        if len(excess) < 2:
            return 0.0
        middle = statistics.median(excess)
        sigma = 1.4826 * statistics.median(abs(e - middle) for e in excess)
        return PAIRED_Z * 1.2533 * sigma / math.sqrt(len(excess))

    def too_noisy(self) -> bool:
        """Whether noise alone would excuse more than `PAIRED_NOISE_SHARE` of a call, more
        than `PAIRED_NOISE_FLOOR_NS` and more than all of what moving the call's data takes
        the stand-in."""
        if self.pairs < 2:
            return False
        allowed = max(
            PAIRED_NOISE_FLOOR_NS,
            statistics.median(self._replay_slack),
            PAIRED_NOISE_SHARE * statistics.median(self._reported),
        )
        return self.noise_ns() > allowed

    def _beyond_chance(self) -> bool:
        """Whether more calls than chance allows exceeded their replays (always, with too
        few pairs to tell: their tolerance is all of moving the data)."""
        if self.pairs < PAIRED_MIN_CALLS:
            return True
        excess = self._excess()
        return sign_test_p(excess) <= PAIRED_SIGN_P

    def lopsided(self) -> int:
        """How many more calls exceeded the median excess by more than the tolerance than fell
        short of it by as much, beyond chance. Honest noise is symmetric about the median (the
        order of each pair is a coin's toss, on one CPU), so work hidden in a minority of the
        calls, which leaves the median alone, shows here."""
        tolerance = self.tolerance_ns()
        excess = self._excess()
        middle = statistics.median(excess) if excess else 0.0
        above = sum(e - middle > tolerance for e in excess)
        below = sum(e - middle < -tolerance for e in excess)
        return max(0, round(above - below - PAIRED_Z * math.sqrt(above + below) - 2))

    def problem(self) -> str | None:
        if self._impossible:
            return _impossible_message(self._impossible)
        hidden, tolerance = self.hidden_ns(), self.tolerance_ns()
        beyond = hidden > PAIRED_SIGN_BAND * tolerance or self._beyond_chance()
        if hidden > tolerance and beyond:
            late = statistics.median(self._after) > statistics.median(self._before)
            why = (
                "work was finished after the timer stopped"
                if late
                else "the timer was changed or work was hidden from it"
            )
            return (
                f"each timed call took {hidden / 1e3:.1f} µs longer by the harness's clock than "
                "the same call replayed by an honest stand-in (noise explains at most "
                f"{tolerance / 1e3:.1f} µs): {why}"
            )
        lopsided = self.lopsided()
        if lopsided:
            return (
                f"{lopsided} of {len(self._before)} timed calls took {tolerance / 1e3:.1f} µs "
                "or more longer by the harness's clock than the typical call, next to the same "
                "calls replayed by an honest stand-in, far more than were as much shorter: the "
                "timer was changed or work was hidden from it in some calls"
            )
        return None


def sign_test_p(differences: list[float]) -> float:
    """The chance of at least as many positive `differences` as seen, were each as likely
    positive as negative (zeros left out)."""
    above = sum(d > 0 for d in differences)
    n = above + sum(d < 0 for d in differences)
    return float(sum(math.comb(n, k) for k in range(above, n + 1)) / 2**n)


def _impossible(window_ns: float, reported_ns: float) -> bool:
    """A reported duration may not exceed the window that contains it."""
    return reported_ns > window_ns * REPORT_TOLERANCE + REPORT_MARGIN_NS


def _impossible_message(count: int) -> str:
    return (
        f"the submission's process reported {count} call(s) longer than the harness saw "
        "them take: its timings were not measured honestly"
    )
