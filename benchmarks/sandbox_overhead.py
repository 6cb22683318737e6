"""sandbox_overhead_ms_root / sandbox_overhead_ms_unprivileged: what the full sandbox adds to
each phase, on a root runner and on an ordinary user's.

A phase is one process tree started by `run_tree`. Both sides start the same Python that
imports nothing (`python -S -c pass`) in a fresh run directory: once wrapped in the run's
bubblewrap sandbox (planned once per run, as the runner does) and in a cgroup of its own
where the machine has them (as the runner's trees are), once bare. Runs alternate so
drift on a noisy machine hits both sides alike; the figure is the difference of the medians.
The unprivileged side runs this script again as a plain user (tests/security/runners.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Figure, log, median, report, rounded

from cluster_manager.sandbox import cgroups, process
from cluster_manager.sandbox.namespaces import Isolation
from cluster_manager.sandbox.plan import HOME_DIR, TMP_DIR, plan_sandbox

RUNS = 31
TARGET_MS = 50.0
COMMAND = (sys.executable, "-S", "-c", "pass")


def _start(workdir: Path, prefix: list[str], isolation: Isolation | None = None) -> float:
    # The sandboxed side gets its cgroup where the machine has a backend, as a run's trees do.
    caps = cgroups.Caps(memory_bytes=1 << 30, processes=512) if prefix else None
    began = time.perf_counter()
    result = process.run_tree(
        [*prefix, *COMMAND],
        cwd=workdir,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        timeout=30,
        output_cap=1 << 16,
        limits=process.ResourceLimits(group=caps),
        isolation=isolation,
    )
    elapsed = time.perf_counter() - began
    if result.exit_code != 0:
        raise RuntimeError(f"the phase exited {result.exit_code}: {result.stderr[-500:]}")
    return elapsed


def measure_here(runs: int = RUNS) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="cm-run-") as tmp:
        workdir = Path(tmp)
        for name in (HOME_DIR, TMP_DIR):
            (workdir / name).mkdir(mode=0o700)
        sandbox = plan_sandbox(workdir)
        if not sandbox.prefix:
            raise RuntimeError(f"no full sandbox here: {sandbox.info}")
        prefix = list(sandbox.prefix)
        # Only the descriptor of the syscall filter the prefix names, as before the filter:
        # the runner's sweep of the sandbox user after each tree is not counted.
        isolation = Isolation(syscall_filter=sandbox.isolation.syscall_filter)
        _start(workdir, prefix, isolation)  # warm-up, both sides
        _start(workdir, [])
        wrapped, bare = [], []
        for _ in range(runs):
            wrapped.append(_start(workdir, prefix, isolation))
            bare.append(_start(workdir, []))
    return {
        "overhead_ms": (median(wrapped) - median(bare)) * 1000,
        "runs": runs,
        "sandboxed_median_ms": round(median(wrapped) * 1000, 2),
        "bare_median_ms": round(median(bare) * 1000, 2),
        "sandboxed_ms": rounded([w * 1000 for w in wrapped], 2),
        "bare_ms": rounded([b * 1000 for b in bare], 2),
    }


def _as_plain_user() -> dict[str, object]:
    """This script again, as an ordinary user (root only), printing its measurement."""
    from tests.security.runners import ensure_plain_user, plain_user_command

    user = ensure_plain_user()
    argv = plain_user_command([sys.executable, __file__, "--measure-here"], user.pw_dir)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the plain user's measurement failed: {done.stderr[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _figure(name: str, measure) -> Figure:
    try:
        details = measure()
    except Exception as exc:
        return Figure(name, None, "ms", TARGET_MS, error=repr(exc))
    value = float(str(details.pop("overhead_ms")))
    log(f"{name}: {value:.1f} ms")
    return Figure(name, value, "ms", TARGET_MS, details=details)


def main() -> int:
    if "--measure-here" in sys.argv:
        print(json.dumps(measure_here()))
        return 0
    if os.geteuid() == 0:
        figures = [
            _figure("sandbox_overhead_ms_root", measure_here),
            _figure("sandbox_overhead_ms_unprivileged", _as_plain_user),
        ]
    else:
        figures = [_figure("sandbox_overhead_ms_unprivileged", measure_here)]
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
