"""The `cluster-manager` command. Settings are built here and passed down to each command.

Exit codes: 0 the submission passed, 1 it did not, 2 bad input (a one-line error).
"""

from __future__ import annotations

# Each command's module is imported when that command runs (see `LazyGroup`).
from cluster_manager.cli.common import cli


def main() -> None:
    cli(prog_name="cluster-manager")
