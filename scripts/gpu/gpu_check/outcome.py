"""A row of the check, what it came to, the check's exit code and its table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from gpu_check.rows_runner import RowContext

Status = Literal["pass", "fail", "skipped"]
PASS: Status = "pass"  # noqa: S105 (an outcome, not a password)
FAIL: Status = "fail"
SKIPPED: Status = "skipped"
EXIT_PASSED, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
SHOWN = {PASS: "pass", FAIL: "FAIL", SKIPPED: "skipped"}


@dataclass(frozen=True)
class Outcome:
    status: Status
    figures: str = ""  # one line for the table: what was measured or counted
    details: str = ""  # what a reader needs when it failed: errors, logs

    def __post_init__(self) -> None:
        # A skip with no reason would read as a pass nobody can check.
        if self.status == SKIPPED and not self.figures.strip():
            raise ValueError("a skipped row must say why in its figures")


def passed(figures: str, details: str = "") -> Outcome:
    return Outcome(PASS, figures, details)


def failed(figures: str, details: str = "") -> Outcome:
    return Outcome(FAIL, figures, details)


def skipped(reason: str, details: str = "") -> Outcome:
    return Outcome(SKIPPED, reason, details)


@dataclass(frozen=True)
class Row:
    name: str  # what --only and --skip take
    title: str  # what it checks, in the table
    run: Callable[[RowContext], Outcome]
    limit_s: float  # it fails when it takes longer; its processes are killed
    quiet: bool = False  # its figures are timings: it runs alone, before the others
    by_default: bool = True  # else it runs only when --only names it (a second call's row)


@dataclass(frozen=True)
class RowResult:
    name: str
    title: str
    outcome: Outcome
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "title": self.title,
            "outcome": self.outcome.status,
            "seconds": round(self.seconds, 1),
            "figures": self.outcome.figures,
            "details": self.outcome.details,
        }


def exit_code(results: Sequence[RowResult]) -> int:
    """0 when every row passed or was skipped for a stated reason; 1 when any failed."""
    return EXIT_FAILED if any(r.outcome.status == FAIL for r in results) else EXIT_PASSED


def render_table(header: Sequence[tuple[str, str]], results: Sequence[RowResult]) -> str:
    """The header's facts, then one line per row; what the check prints last."""
    from cluster_manager.rendering.reports import format_table

    width = max((len(key) for key, _ in header), default=0)
    lines = [f"{key.ljust(width)}  {value}" for key, value in header]
    rows = [
        (r.name, SHOWN[r.outcome.status], f"{r.seconds:.0f} s", r.outcome.figures or "—")
        for r in results
    ]
    table = format_table(("row", "outcome", "took", "figures"), rows)
    counts = {s: sum(r.outcome.status == s for r in results) for s in (PASS, FAIL, SKIPPED)}
    total = f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIPPED]} skipped"
    return "\n".join([*lines, "", table, "", total])


def render_details(results: Sequence[RowResult]) -> str:
    """Each row's details that are worth reading: failures first, printed before the table."""
    ordered = sorted(results, key=lambda r: r.outcome.status != FAIL)
    parts = [
        f"── {r.name} ({SHOWN[r.outcome.status]}): {r.title}\n{r.outcome.details.rstrip()}"
        for r in ordered
        if r.outcome.details.strip()
    ]
    return "\n\n".join(parts)
