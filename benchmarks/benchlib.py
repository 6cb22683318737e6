"""What every benchmark shares: figures, statistics, output, and throw-away databases.

Each benchmark module is a script: `python benchmarks/NAME.py` prints its figures as a table;
`--json PATH` also writes them as JSON for `run.py` to gather.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
# The fakes the benchmarks drive (fake GitHub, fake Discord) live in the test suite.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
DB_PREFIX = "cm_bench_"


@dataclass
class Figure:
    """One measured figure and its target (`value <= target` passes; no target: informative)."""

    name: str
    value: float | None
    unit: str
    target: float | None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def passed(self) -> bool | None:
        if self.error is not None or self.value is None:
            return False
        if self.target is None:
            return None
        return self.value <= self.target

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("name")
        data["pass"] = self.passed
        return data


# --- statistics -------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: a value that was actually observed."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return float(ordered[rank - 1])


def rounded(values: Sequence[float], digits: int = 4) -> list[float]:
    return [round(v, digits) for v in values]


# --- output -----------------------------------------------------------------------------------


def format_value(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def verdict(figure: dict[str, Any]) -> str:
    """pass, FAIL (misses its target), ERROR, WORSE (a regression against the baseline), info."""
    if figure.get("error"):
        return "ERROR"
    if figure.get("pass") is False:
        return "FAIL"
    if figure.get("regressed"):
        return "WORSE"
    return {True: "pass", None: "info"}[figure.get("pass")]


def table(figures: dict[str, dict[str, Any]]) -> str:
    """One row per figure; with a `vs_baseline` column when run.py compared them."""
    compared = any("vs_baseline" in fig for fig in figures.values())
    rows: list[tuple[str, ...]] = [("figure", "value", "target", "unit", "result")]
    if compared:
        rows[0] = (*rows[0][:2], "vs base", *rows[0][2:])
    for name, fig in figures.items():
        target = "-" if fig.get("target") is None else f"<= {format_value(fig['target'])}"
        row = (name, format_value(fig.get("value")), target, fig["unit"], verdict(fig))
        if compared:
            ratio = fig.get("vs_baseline")
            row = (*row[:2], "-" if ratio is None else f"{ratio:.2f}x", *row[2:])
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def figures_json(figures: Sequence[Figure]) -> dict[str, dict[str, Any]]:
    return {f.name: f.to_json() for f in figures}


def report(figures: Sequence[Figure], argv: Sequence[str] | None = None) -> int:
    """Prints the table, writes `--json PATH` if asked; exit status 1 when a figure fails."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    data = figures_json(figures)
    for name, fig in data.items():
        if fig.get("error"):
            print(f"{name}: error: {fig['error']}", file=sys.stderr)
    print(table(data))
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return 1 if any(f.passed is False for f in figures) else 0


def log(message: str) -> None:
    """Progress goes to stderr, so a module's stdout is only its table."""
    print(f"  · {message}", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_1m": os.getloadavg()[0],
    }


# --- databases --------------------------------------------------------------------------------


def server_url() -> str:
    return os.environ.get("DATABASE_URL") or DEFAULT_SERVER


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def _admin_execute(sql: str) -> None:
    import psycopg

    with psycopg.connect(_with_database(server_url(), "postgres"), autocommit=True) as conn:
        conn.execute(sql)


@contextlib.contextmanager
def scratch_database(label: str) -> Iterator[str]:
    """A freshly migrated database of our own, dropped afterwards; yields its URL."""
    from cluster_manager.storage.migrations import apply_migrations

    name = f"{DB_PREFIX}{label}_{uuid.uuid4().hex[:8]}"
    _admin_execute(f'CREATE DATABASE "{name}"')
    try:
        url = _with_database(server_url(), name)
        apply_migrations(url)
        yield url
    finally:
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
