"""workflow_setup_s_cold / workflow_setup_s_warm: seconds from a GitHub job's start to the
step that starts the runner entrypoint, with the NVIDIA workflow executed by act on this
machine (tests/act/driver.py: host mode, the launcher's own inputs).

Cold is a brand-new runner machine: an empty tool cache, so the job builds the runner's
environment (a venv with torch and the runner's requirements, from pip's cache). Warm is every
later job on that machine: the environment is found by its content hash and reused. Each job
runs the test suite's fast fixture task in test mode (the driver's `fast_request`); only the
setup before the entrypoint is measured, which no task changes.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchlib import Figure, log, median, report, rounded

from cluster_manager.core.models import Mode
from tests.act.driver import NVIDIA, Act, fast_request

WARM_RUNS = 5
TARGET_WARM_S = 2.0


def _setup_s(act: Act) -> float:
    request, _ = fast_request(Mode.TEST)
    job, _, _ = act.dispatch(*NVIDIA, request)
    if job.returncode != 0 or job.setup_s is None:
        raise RuntimeError(f"the job failed (act exit {job.returncode}): {job.log[-1500:]}")
    return job.setup_s


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cm-bench-act-") as tmp:
        act = Act(cache=Path(tmp) / "act-cache")
        try:
            cold = _setup_s(act)
            warm = [_setup_s(act) for _ in range(WARM_RUNS)]
        except Exception as exc:
            return report(
                [
                    Figure("workflow_setup_s_cold", None, "s", None, error=repr(exc)),
                    Figure("workflow_setup_s_warm", None, "s", TARGET_WARM_S, error=repr(exc)),
                ]
            )
    log(f"workflow setup: cold {cold:.1f} s, warm median {median(warm):.2f} s")
    return report(
        [
            Figure("workflow_setup_s_cold", round(cold, 2), "s", None),
            Figure(
                "workflow_setup_s_warm",
                round(median(warm), 2),
                "s",
                TARGET_WARM_S,
                details={"runs": WARM_RUNS, "setup_s": rounded(warm, 2)},
            ),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
