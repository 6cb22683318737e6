"""Turns the tests marked `reliability` into `docs/RELIABILITY.md`.

    @pytest.mark.reliability("Anti-cheat", "printing fake results to stdout", "wrong_answer")
    def test_...(record_property):
        ...
        record_property("observed", f"{result.verdict}: {result.message}")  # optional

Every marked test is one row: what was tried, the outcome the test asserts, and what happened
in this run (the recorded observation when the test passed, the failure when it did not, the
reason for a known gap when it is a strict xfail). `make reliability` runs them and writes the
page; it works with xdist, since the marker travels to the controller in `user_properties`.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

CATEGORIES = ("Sandbox", "Anti-cheat", "Bad input", "Faults", "Access")
MARKER = "reliability"
PROPERTY = "reliability"
OBSERVED = "observed"
MAX_CELL = 240


@dataclass
class Row:
    category: str
    tried: str
    expected: str
    test: str
    outcome: str = "not run"
    recorded: str = ""  # what the test saw (`record_property("observed", ...)`)
    failure: str = ""  # what happened instead, when the outcome is not "as expected"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reliability-report",
        metavar="PATH",
        help="write the table of the tests marked `reliability` to PATH (markdown)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(category, tried, expected): a row of docs/RELIABILITY.md; "
        f"category is one of {', '.join(CATEGORIES)}",
    )
    if config.getoption("--reliability-report") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Collector(config), "reliability-collector")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker(MARKER)
        if marker is None:
            continue
        category, tried, expected = marker.args
        if category not in CATEGORIES:
            raise pytest.UsageError(f"{item.nodeid}: unknown reliability category {category!r}")
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            tried = f"{tried} [{callspec.id}]"
        row = {"category": category, "tried": tried, "expected": expected}
        item.user_properties.append((PROPERTY, json.dumps(row)))


class _Collector:
    def __init__(self, config: pytest.Config) -> None:
        self.path = Path(config.getoption("--reliability-report"))
        self.rows: dict[str, Row] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if PROPERTY not in properties:
            return
        row = self.rows.get(report.nodeid)
        if row is None:
            row = Row(**json.loads(properties[PROPERTY]), test=report.nodeid)
            self.rows[report.nodeid] = row
        if properties.get(OBSERVED):
            row.recorded = str(properties[OBSERVED])
        # A passing teardown must not hide a failed call: only the first failure sticks.
        if (report.when == "call" or report.failed or report.skipped) and not row.failure:
            row.outcome, row.failure = _outcome(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(render(list(self.rows.values())), encoding="utf-8")


def _outcome(report: pytest.TestReport) -> tuple[str, str]:
    """The row's status and, unless the test passed, what happened instead."""
    reason = getattr(report, "wasxfail", None)
    if reason is not None:
        return "known gap", reason
    if report.passed:
        return "as expected", ""
    if report.skipped:
        return "not run", _skip_reason(report)
    return "FAILED", f"{report.when} failed: {_first_line(report.longreprtext)}"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return _first_line(str(longrepr))


def _first_line(text: str) -> str:
    """pytest's first `E ` line (the assertion), else the text's last line."""
    errors = [ln.strip()[1:].strip() for ln in text.splitlines() if ln.strip().startswith("E ")]
    if errors:
        return errors[0]
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render(rows: list[Row]) -> str:
    counts = {status: sum(r.outcome == status for r in rows) for status in _STATUSES}
    summary = ", ".join(
        f"{n} {'known gaps' if status == 'known gap' and n > 1 else status}"
        for status, n in counts.items()
        if n
    )
    lines = [
        "# Reliability",
        "",
        "Every attack, bad input and fault the test suite tries, what the system must do, and",
        "what it did in the run that wrote this page. Regenerate it with:",
        "",
        "    make reliability",
        "",
        f"Last run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.system()} "
        f"{platform.machine()}, Python {platform.python_version()}: {len(rows)} rows, "
        f"{summary or 'none run'}.",
        "",
        "A *known gap* is an xfail: the attack still works. Strict ones fail the day it stops",
        "working, so the row cannot silently go stale; one whose success depends on the",
        "machine's load is not strict, and its reason says what bounds it.",
        "",
        "A score is the harness's own clock: each timed call's window, from its inputs sent to",
        "its output read, less what moving the same data takes a trusted stand-in while every",
        "process of the submission is stopped. Nothing the submission reports enters it, so",
        "the rows on timers and timed steps show a forged report ranked at the real time",
        "(`docs/MEASUREMENT.md`, `src/cluster_manager/harness/trusted.py`).",
    ]
    for category in CATEGORIES:
        chosen = sorted((r for r in rows if r.category == category), key=lambda r: r.test)
        if not chosen:
            continue
        lines += ["", f"## {category}", "", "| Tried | Expected | Observed | Status | Test |"]
        lines.append("|---|---|---|---|---|")
        for row in chosen:
            observed = row.failure or row.recorded or row.expected
            if row.failure and row.recorded:
                observed = f"{row.failure} (it saw: {row.recorded})"
            cells = (row.tried, row.expected, observed, row.outcome, f"`{row.test}`")
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


_STATUSES = ("as expected", "known gap", "FAILED", "not run")
