"""`python -m gpu_check` (scripts/gpu/check installs the package first, then runs this).

Exit code: 0 every row passed or was skipped for a stated reason; 1 a row failed; 2 no usable
CUDA device (refused before anything is done) or an unknown row name.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gpu_check import machine
from gpu_check.outcome import (
    EXIT_REFUSED,
    Row,
    RowResult,
    exit_code,
    render_details,
    render_table,
)

ROOT = Path(__file__).resolve().parents[3]
BUDGET_S = 420.0  # the rows' share of the check's 8 minutes; installing takes the rest


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/gpu/check", description=__doc__)
    parser.add_argument("--only", action="append", metavar="ROW", help="run only this row")
    parser.add_argument("--skip", action="append", metavar="ROW", help="leave this row out")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    parser.add_argument(
        "--refuse-only", action="store_true", help="only say whether this machine can run it"
    )
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for all rows")
    parser.add_argument("--gpu", default="H100", help="the GPU type this machine stands for")
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT") or None)
    return parser.parse_args(argv)


def main(
    argv: Sequence[str] | None = None,
    *,
    rows: Sequence[Row] | None = None,
    probe: Callable[[], machine.Facts] = machine.probe,
) -> int:
    args = parse(argv)
    if not args.list:  # first, with the standard library alone: nothing is installed yet
        facts = probe()
        if (why := machine.refusal(facts)) is not None:
            print(why, file=sys.stderr)
            return EXIT_REFUSED
        if args.refuse_only:
            return 0
    from gpu_check.rows import ROWS, select_rows

    rows = ROWS if rows is None else rows
    if args.list:
        for row in rows:
            asked = "" if row.by_default else " (only when --only names it)"
            print(f"{row.name:<15} {row.title}{asked}")
        return 0
    try:
        chosen = select_rows(tuple(rows), args.only, args.skip)
    except ValueError as exc:
        print(f"gpu check: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return run(args, chosen, machine.with_versions(facts))


def run(args: argparse.Namespace, rows: Sequence[Row], facts: machine.Facts) -> int:
    from gpu_check.rows_runner import run_rows
    from gpu_check.setting import make_setting

    setting = make_setting(ROOT, facts, gpu=args.gpu, out=args.out)
    header = machine.header(facts, machine.bwrap_line(dict(setting.env)))
    results = run_rows(rows, setting, budget_s=args.budget)
    details, table = render_details(results), render_table(header, results)
    text = f"{details}\n\n{table}" if details else table
    print(text, flush=True)  # the table last: the end of the output is what comes back
    write_report(setting.out or setting.work, header, results, text)
    return exit_code(results)


def write_report(
    folder: Path, header: list[tuple[str, str]], results: Sequence[RowResult], text: str
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    install = os.environ.get("GPU_CHECK_INSTALL_LOG")
    report = {
        "header": dict(header),
        "rows": [r.to_json() for r in results],
        "exit_code": exit_code(results),
        "install_log": Path(install).read_text(errors="replace")[-20000:] if install else "",
    }
    (folder / "gpu-check.json").write_text(json.dumps(report, indent=2) + "\n")
    (folder / "gpu-check.txt").write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
