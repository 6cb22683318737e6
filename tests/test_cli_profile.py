"""`cluster-manager submit --mode profile` with Nsight Compute's filter, as users run it: a real
process on a real Postgres, the run served by the submit itself under a fake ncu on PATH, whose
command line (recorded in the report it wrote) shows the filter; bad options are usage errors."""

from __future__ import annotations

import base64
from pathlib import Path

import psycopg
import pytest

from cluster_manager.core.run_results import RunResult
from tests.conftest import EXAMPLES
from tests.support.fake_ncu import option_values, recorded_argv
from tests.test_cli_db import cm as cli_on_database  # noqa: F401 (a fixture)
from tests.test_cli_db import create_identity

IDENTITY = EXAMPLES / "identity_py"
SUBMISSION = str(IDENTITY / "submission.py")


@pytest.fixture
def cm(cli_on_database):  # noqa: F811 (the fixture imported above)
    """The CLI on this test's database, with the identity leaderboard created."""
    created = create_identity(cli_on_database)
    assert created.returncode == 0, created.stderr
    return cli_on_database


def stored_submissions(db_url: str) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("SELECT mode, profile_options FROM submissions").fetchall()


def profiled_result(db_url: str) -> RunResult:
    with psycopg.connect(db_url) as conn:
        (row,) = conn.execute("SELECT result FROM runs").fetchall()
    return RunResult.from_json(row[0])


def test_the_filter_options_reach_ncus_command_line(cm, db_url: str, fake_ncu: Path):
    submitted = cm(
        "submit", "identity", SUBMISSION, "--user", "alice", "--mode", "profile",
        "--ncu-kernel-name", "custom_.*", "--ncu-launch-skip", "2", "--ncu-launch-count", "3",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr

    ((mode, stored),) = stored_submissions(db_url)
    assert mode == "profile"
    assert stored == {
        "kernel_name": "custom_.*",
        "kernel_name_base": "function",
        "launch_skip": 2,
        "launch_count": 3,
    }
    profiler = profiled_result(db_url).phases[-1].profiler
    assert profiler is not None and profiler.tool == "ncu", profiler
    options = option_values(recorded_argv(base64.b64decode(profiler.report)))
    assert options["--kernel-name"] == "regex:custom_.*"
    assert options["--kernel-name-base"] == "function"
    assert (options["--launch-skip"], options["--launch-count"]) == ("2", "3")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--mode", "profile", "--ncu-launch-count", "51"],
            "Invalid value for '--ncu-launch-count': launch count: a whole number from 1 to 50",
        ),
        (
            ["--mode", "profile", "--ncu-kernel-name", "gemm("],
            "Invalid value for '--ncu-kernel-name': kernel name filter: not a regex",
        ),
        (
            ["--mode", "profile", "--ncu-kernel-name-base", "short"],
            "Invalid value for '--ncu-kernel-name-base': 'short' is not one of",
        ),
        (
            ["--mode", "test", "--ncu-kernel-name", "gemm"],
            "Nsight Compute filters (kernel name, name base, launch skip and count) are for "
            "profile mode only, not test mode",
        ),
    ],
)
def test_a_bad_filter_is_a_usage_error_and_stores_nothing(
    cm, db_url: str, options: list[str], message: str
):
    refused = cm("submit", "identity", SUBMISSION, "--user", "alice", *options)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert message in refused.stderr
    assert stored_submissions(db_url) == []
