"""`cluster-manager` as an operator runs it: a process of its own, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

Cm = Callable[..., subprocess.CompletedProcess[str]]
COMMAND = (sys.executable, "-m", "cluster_manager")
# A test talks to its own database, never to a server an operator's shell may point at.
NOT_INHERITED = ("CLUSTER_MANAGER_API_URL",)


def environment(
    ours: Mapping[str, str] | None = None, *, unset: Collection[str] = NOT_INHERITED
) -> dict[str, str]:
    """This process's environment as it is at the call (a fixture may have put a tool on
    PATH since), less `unset`, with `ours` over it."""
    base = {k: v for k, v in os.environ.items() if k not in unset}
    return {**base, **(ours or {})}


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`cluster-manager ARGS` to its end; `env` defaults to `environment()`."""
    return subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(env) if env is not None else environment(),
        cwd=cwd,
        input=stdin,
    )
