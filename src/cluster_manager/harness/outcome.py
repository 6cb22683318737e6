"""How a case of the built-in harness ends: its outcome, and the exception that ends it early."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_manager.core.models import Verdict
from cluster_manager.harness import timing


@dataclass(frozen=True)
class Outcome:
    ok: bool
    error: str = ""
    message: str = ""
    verdict: Verdict | None = None  # set when the failure is not a wrong answer
    stats: timing.Stats | None = None
    report: str = ""
    trace: str = ""  # profile mode: gzipped Chrome trace, base64


class CaseFailed(Exception):
    """Ends the case with `outcome`: a wrong answer, the worker's error, or its death.
    `worker_lost`: the worker died or broke the protocol, so it must be replaced; one that
    reported its submission's exception is still in step and is kept (no new interpreter)."""

    def __init__(self, outcome: Outcome, *, worker_lost: bool = False) -> None:
        super().__init__(outcome.error)
        self.outcome = outcome
        self.worker_lost = worker_lost


def wrong(message: str) -> CaseFailed:
    return CaseFailed(Outcome(ok=False, error=message))


def broken(message: str) -> CaseFailed:
    outcome = Outcome(ok=False, error=message, verdict=Verdict.RUNTIME_ERROR)
    return CaseFailed(outcome, worker_lost=True)
