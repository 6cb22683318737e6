"""Writing an export's pages as CSV, JSON lines or Parquet, page by page (never the whole
data set in memory). pyarrow is imported only for Parquet."""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any, Literal

Format = Literal["csv", "jsonl", "parquet"]
Kind = Literal["rankings", "submissions"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl", "parquet")
Row = dict[str, Any]

COLUMNS: dict[Kind, tuple[str, ...]] = {
    "rankings": (
        "leaderboard",
        "gpu",
        "rank",
        "user_id",
        "team",
        "score_s",
        "submission_id",
        "submitted_at",
    ),
    "submissions": (
        "leaderboard",
        "submission_id",
        "user_id",
        "user_name",
        "file_name",
        "mode",
        "submitted_at",
        "invalidated",
        "code",
        "runs",
    ),
}


async def write_export(
    pages: AsyncIterator[list[Row]], kind: Kind, fmt: Format, out: IO[bytes]
) -> int:
    """Writes every page to `out`; how many rows."""
    if fmt == "parquet":
        return await _parquet(pages, kind, out)
    text = _TextOut(out)
    writer = csv.DictWriter(text, COLUMNS[kind]) if fmt == "csv" else None
    if writer is not None:
        writer.writeheader()
    rows = 0
    async for page in pages:
        for row in page:
            full = _complete(row, kind)
            if writer is not None:
                writer.writerow({k: _cell(v) for k, v in full.items()})
            else:
                text.write(json.dumps(full, ensure_ascii=False) + "\n")
        rows += len(page)
    return rows


def default_name(leaderboard: str, kind: Kind, fmt: Format) -> Path:
    return Path(f"{leaderboard}-{kind}.{fmt}")


def _complete(row: Row, kind: Kind) -> Row:
    """Every column of the kind, in order; one the row lacks (a ranking entry of no team)
    is null, so that each line of JSON has the same keys."""
    return {**dict.fromkeys(COLUMNS[kind]), **row}


def _cell(value: Any) -> Any:
    """CSV has no nesting: a run list becomes its JSON."""
    return json.dumps(value) if isinstance(value, list | dict) else value


class _TextOut:
    """A text view of a binary stream that `csv` and `json` can write to."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(text.encode("utf-8"))
        return len(text)


def _schema(kind: Kind) -> Any:
    import pyarrow as pa

    if kind == "rankings":
        return pa.schema(
            [
                ("leaderboard", pa.string()),
                ("gpu", pa.string()),
                ("rank", pa.int64()),
                ("user_id", pa.string()),
                ("team", pa.string()),  # the team whose entry it is, or empty
                ("score_s", pa.float64()),
                ("submission_id", pa.int64()),
                ("submitted_at", pa.string()),
            ]
        )
    run = pa.struct(
        [
            ("gpu", pa.string()),
            ("secret", pa.bool_()),
            ("passed", pa.bool_()),
            ("verdict", pa.string()),
            ("score", pa.float64()),
        ]
    )
    return pa.schema(
        [
            ("leaderboard", pa.string()),
            ("submission_id", pa.int64()),
            ("user_id", pa.string()),
            ("user_name", pa.string()),
            ("file_name", pa.string()),
            ("mode", pa.string()),
            ("submitted_at", pa.string()),
            ("invalidated", pa.string()),
            ("code", pa.string()),
            ("runs", pa.list_(run)),
        ]
    )


async def _parquet(pages: AsyncIterator[list[Row]], kind: Kind, out: IO[bytes]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema(kind)
    rows = 0
    with pq.ParquetWriter(out, schema) as writer:
        async for page in pages:
            writer.write_table(pa.Table.from_pylist(page, schema=schema))
            rows += len(page)
    return rows
