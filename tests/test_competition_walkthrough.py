"""docs/OPERATING.md's "Running a competition", run as written: every command of its
walk-through, in order, as an organiser types them from a fresh clone, on a database of this
test's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def walk_through() -> str:
    page = (ROOT / "docs" / "OPERATING.md").read_text(encoding="utf-8")
    section = page.split("\n## Running a competition\n", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert match, "the section has no bash block"
    return match.group(1)


def test_the_walk_through_runs_as_written(fresh_db_url: str, tmp_path: Path):
    # The clone's layout, as the commands name it: the sources and the venv's command.
    (tmp_path / "src").symlink_to(ROOT / "src")
    command = tmp_path / ".venv" / "bin" / "cluster-manager"
    command.parent.mkdir(parents=True)
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cluster_manager "$@"\n')
    command.chmod(0o755)
    script = walk_through()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTER_MANAGER_")}
    env |= {"DATABASE_URL": fresh_db_url, "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        ["bash", "-euxo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # What the commands said they did, read back.
    assert "spring-identity" in done.stdout and "spring-softmax" in done.stdout
    assert "unbanned alice" in done.stdout
    assert "spring-softmax takes no runs after its deadline" in done.stdout
    assert "Fast Ones (alice)" in done.stdout  # the team ranks as one entry
    assert "spring-identity — runs after the deadline" in done.stdout
    assert len((tmp_path / "codes.txt").read_text().split()) == 20
    exported = {p.name for p in tmp_path.rglob("spring-identity*")}
    assert {"spring-identity-rankings.parquet", "spring-identity-submissions.jsonl"} <= exported
    assert (tmp_path / "exports" / "spring-identity-rankings.csv").is_file()
