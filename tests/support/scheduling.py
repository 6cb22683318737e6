"""Keeps both test processes busy to the end: the tests known to be heavy go first, longest
first, so xdist hands them out while the many quick ones are left to fill the gaps. That
needs `--maxschedchunk 1` (the Makefile's): xdist otherwise starts each process on a quarter of
the suite in this order, and one of them would get every heavy test.

What is heavy comes from tests/durations.json, written by a whole-suite run with
`--store-durations` (`make durations`); tests it does not list keep their collection order
after the heavy ones. Only the heavy tests move, so module-scoped fixtures are still set up once
for the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DURATIONS_FILE = Path(__file__).resolve().parents[1] / "durations.json"
# Tests at least this long (setup, call and teardown together) are scheduled first.
HEAVY_S = 4.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-durations",
        action="store_true",
        help=f"write the heavy tests' durations of this run to {DURATIONS_FILE.name}",
    )


def _known() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    known = _known()
    heavy = [item for item in items if known.get(item.nodeid, 0.0) >= HEAVY_S]
    heavy.sort(key=lambda item: (-known[item.nodeid], item.nodeid))
    chosen = {id(item) for item in heavy}
    items[:] = heavy + [item for item in items if id(item) not in chosen]


class DurationStore:
    """Adds up each test's phases as their reports reach this (the controlling) process."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):
            return  # an xdist worker: the controller writes the file
        heavy = {k: round(v, 1) for k, v in sorted(self.seconds.items()) if v >= HEAVY_S / 2}
        DURATIONS_FILE.write_text(json.dumps(heavy, indent=1, ensure_ascii=False) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--store-durations"):
        config.pluginmanager.register(DurationStore(), "durations-store")
