"""A real one-node Slurm cluster on loopback for the Slurm launcher's tests.

`scripts/slurm/setup.sh` installs and starts it (root, Debian). Where it cannot, the tests that
need it are skipped, except under CI (`CI` set), where that is a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = ROOT / "scripts" / "slurm" / "setup.sh"
# A first run installs packages; later runs only check that the daemons answer.
SETUP_TIMEOUT_S = 900


def start_cluster() -> str | None:
    """Runs setup.sh; None when the cluster is up, else why it is not."""
    try:
        done = subprocess.run(
            ["bash", str(SETUP_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=SETUP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{SETUP_SCRIPT.name} did not finish: {exc}"
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        return f"{SETUP_SCRIPT.name} failed (exit {done.returncode}):\n{tail}"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """The loopback cluster, started once per test session (and left running after it)."""
    error = start_cluster()
    if error is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI needs the Slurm test cluster: {error}")
    pytest.skip(f"no Slurm test cluster: {error}")


def squeue_active(job_id: str) -> str:
    """The job's state among jobs that are not over yet ('' once it has ended or is unknown)."""
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.strip()


def jobs_named(name: str) -> list[str]:
    """Ids of every job slurmctld still knows with this name, ended ones included."""
    done = subprocess.run(
        ["squeue", "-h", "--states=all", "-n", name, "-o", "%i"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.split()
