"""The platform installed where only its owner may read (a `pip install --target "$(mktemp
-d)"` folder, a venv under a private home): the sandbox's user still imports it, and when it
cannot, the run is the runner's failure (`internal_error`), never the competitor's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import cluster_manager
from cluster_manager.core.models import Verdict
from cluster_manager.sandbox.plan import full_sandbox_problem
from tests.conftest import EXAMPLES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox user of its own needs root"),
    pytest.mark.skipif(full_sandbox_problem() is not None, reason="needs the full sandbox"),
]
PACKAGE = Path(cluster_manager.__file__).parent


@pytest.fixture
def closed_install() -> Iterator[Path]:
    """A copy of the package in a folder of mode 0700 (what `mktemp -d` makes)."""
    folder = Path(tempfile.mkdtemp(prefix="cm-closed-"))
    try:
        shutil.copytree(
            PACKAGE, folder / "cluster_manager", ignore=shutil.ignore_patterns("__pycache__")
        )
        assert folder.stat().st_mode & 0o777 == 0o700
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.reliability(
    "Sandbox",
    "the package installed in a folder only root may read (mode 0700) runs a sandboxed eval",
    "the folder is opened to the sandbox's user child by child; the run passes",
)
def test_a_package_in_a_closed_folder_runs_in_the_sandbox(closed_install, record_property):
    env = {**os.environ, "PYTHONPATH": str(closed_install)}
    where = subprocess.run(
        [sys.executable, "-c", "import cluster_manager; print(cluster_manager.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(closed_install)), where
    identity = EXAMPLES / "identity_py"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster_manager",
            "eval",
            str(identity),
            str(identity / "submission.py"),
            "--sandbox",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result = json.loads(done.stdout)
    record_property("observed", f"{result['verdict']}: {result['message']}")
    assert result["passed"], result["message"]


def test_a_harness_that_cannot_import_the_platform_is_the_runners_fault(closed_install):
    """The folder left closed (nothing opened): every run failed `runtime_error` ("No module
    named 'cluster_manager'"), right and wrong submissions alike."""
    identity = EXAMPLES / "identity_py"
    args = ["eval", str(identity), str(identity / "submission.py"), "--sandbox", "--json"]
    script = (
        "from cluster_manager.sandbox import masks\n"
        "masks.OPEN_DEPTH = 0\n"
        "from cluster_manager.cli.common import cli\n"
        f"cli({args!r}, prog_name='cluster-manager')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(closed_install)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    result = json.loads(done.stdout)
    assert result["verdict"] == Verdict.INTERNAL_ERROR.value, result["message"]
    assert "cannot import cluster_manager" in result["message"]
    assert "the runner's fault, not the submission's" in result["message"]
