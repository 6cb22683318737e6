"""What a ranked pair (a submission's public run and its secret re-run on one GPU) scores.

The pair ranks with the worse of its two scores: a kernel fitted to the public inputs ranks
with its slower secret time, and a secret run that happened to be fast cannot rank below
what the public run measured."""

from __future__ import annotations


def pair_score(public: float | None, secret: float | None) -> float | None:
    """The score the pair ranks with (seconds, lower is better); None unless both runs have
    one."""
    if public is None or secret is None:
        return None
    return max(public, secret)
