"""Writes docs/COMPATIBILITY.md: `leaderboard check` on every competition file of a problem set
checkout (gpu-mode/reference-kernels' `problems/`), with the tables it prints.

    python scripts/compatibility.py PROBLEMS_DIR [--commit SHA] [--out docs/COMPATIBILITY.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

REPOSITORY = "https://github.com/gpu-mode/reference-kernels"


def check(competition: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_manager", "leaderboard", "check", str(competition), *flags],
        capture_output=True,
        text=True,
        check=False,
    )


def table_of(text: str) -> str:
    """The table `check` prints: everything before the first blank line."""
    return text.split("\n\n", 1)[0]


def first_line(text: str, limit: int = 110) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[-1] if lines and lines[0].startswith("Traceback") else (lines or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def section(competition: Path) -> tuple[str, list[dict]]:
    rows = json.loads(check(competition, "--json").stdout)
    printed = check(competition)
    lines = [
        f"### {competition.name}",
        "",
        f"`cluster-manager leaderboard check problems/{competition.name}` (exit code "
        f"{printed.returncode}):",
        "",
        "```",
        table_of(printed.stdout),
        "```",
        "",
        "| task | why it cannot run here, or its first error |",
        "| --- | --- |",
    ]
    lines += [f"| {r['name']} | {first_line(r['error']) or '—'} |" for r in rows]
    return "\n".join(lines) + "\n", rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path, help="the problem set's problems/ folder")
    parser.add_argument("--commit", help="the commit checked out (default: git rev-parse HEAD)")
    parser.add_argument("--out", type=Path, default=Path("docs/COMPATIBILITY.md"))
    args = parser.parse_args()
    commit = (
        args.commit
        or subprocess.run(
            ["git", "-C", str(args.problems), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )

    sections, all_rows = [], []
    for competition in sorted(args.problems.glob("*.yaml")):
        print(f"… {competition.name}", file=sys.stderr)
        text, rows = section(competition)
        sections.append(text)
        all_rows += rows
    loaded = sum(r["loaded"] for r in all_rows)
    ran = [r for r in all_rows if r["passed"] is not None]
    summary = (
        f"{len(all_rows)} problems in {len(sections)} competition files: {loaded} load, "
        f"{len(ran)} can run on this machine ({sum(bool(r['passed']) for r in ran)} pass), "
        f"{sum(bool(r['needs']) for r in all_rows)} say which GPU they need, "
        f"{sum(not r['ok'] for r in all_rows)} fail."
    )
    template = (Path(__file__).with_name("compatibility.md.in")).read_text()
    args.out.write_text(
        template.format(
            repository=REPOSITORY,
            commit=commit,
            date=datetime.now(UTC).strftime("%Y-%m-%d"),
            summary=summary,
            sections="\n".join(sections),
        )
    )
    print(summary, file=sys.stderr)
    return 0 if all(r["ok"] for r in all_rows) else 1


if __name__ == "__main__":
    sys.exit(main())
