"""What a flagged timing needs to be cleared, and what a ranked timing needs to be scored.

A burst of load from elsewhere can flag an honest timing, while hidden work shows in every
timing: a flagged case is timed once more (`Retimings`), and the second timing must be
clearly clean (`clears`). A ranked timing with fewer pairs than the witness needs to judge is
not scored at all (`too_few_pairs`): with a handful of pairs, noise excuses anything; nor is
one whose noise stays too wide to judge (`too_noisy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster_manager.harness import timing
from cluster_manager.harness.witness import (
    PAIRED_MIN_CALLS,
    PAIRED_NOISE_SHARE,
    PairedWitness,
)

# A second timing clears a flagged one only when its median excess stays within this share of
# its tolerance: one that merely scrapes under is what hidden work on a noisy machine looks
# like too.
CLEARING_SHARE = 0.5


@dataclass
class Retimings:
    """How many cases of a phase whose timing the witness flagged are timed once more. One
    per phase, so a phase keeps within the budget it planned (a case's share of it is kept
    free: `Harness.run_benchmarks`)."""

    left: int = 1

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


def clears(again: PairedWitness, *, ranked: bool) -> bool:
    """Whether a second timing clears a flagged first one: no rule broken, as many pairs as a
    judgement needs (with fewer, a wide tolerance would excuse anything), in a ranked run noise
    narrow enough to judge (benchmark mode shows noisy timings), and a median excess well
    within its tolerance."""
    enough = judges(again) if ranked else again.pairs >= PAIRED_MIN_CALLS
    return (
        again.problem() is None
        and enough
        and again.hidden_ns() <= CLEARING_SHARE * again.tolerance_ns()
    )


def judges(timing: PairedWitness) -> bool:
    """Whether a timing can be judged at all: as many pairs as a judgement needs and noise
    narrow enough (its rules may still find a problem)."""
    return timing.pairs >= PAIRED_MIN_CALLS and not timing.too_noisy()


def too_few_pairs(witness: PairedWitness, stats: timing.Stats) -> str:
    """Why a ranked timing with fewer than `PAIRED_MIN_CALLS` pairs is not scored."""
    return (
        f"only {witness.pairs} timed call(s) of {stats.mean / 1e6:.1f} ms fit in the time the "
        f"ranked run had for this case, each with its replay; checking that the timings are "
        f"honest takes {PAIRED_MIN_CALLS}: the kernel is too slow for this task's ranked time "
        "limit, or the machine was too busy (submitting again may pass)"
    )


def too_noisy(witness: PairedWitness, stats: timing.Stats) -> str:
    """Why a ranked timing whose noise stayed too wide to judge is not scored."""
    return (
        f"the machine was too busy to check this case's timings: over {witness.pairs} timed "
        f"calls of {stats.mean / 1e3:.0f} µs, the noise between each call and its honest "
        f"replay could hide {witness.noise_ns() / 1e3:.0f} µs of every call, more than "
        f"{PAIRED_NOISE_SHARE:.0%} of it (submitting again may pass)"
    )
