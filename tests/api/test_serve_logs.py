"""What `cluster-manager serve` logs while an organiser runs it for weeks: each job followed by
its id through a SIGKILL and a restart, uvicorn's lines in the same format, and never a
credential or a secret seed. Real processes over a real database, as test_serve.py runs them."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.api.test_serve import cli, free_port
from tests.support.fast_task import FAST_TASK

ADMIN_TOKEN = "admin-secret-for-the-log-test"
# The first call sleeps: the runs are surely under way when the server is killed.
SLOW_FIRST_CALL = """
import time

from task import input_t, output_t

_slept = False


def custom_kernel(data: input_t) -> output_t:
    global _slept
    if not _slept:
        _slept = True
        time.sleep(2)
    return data.clone()
"""
# A line as `cli.logs` writes it: UTC time, level, logger, message.
UTC_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00"
LINE = re.compile(rf"^{UTC_TIME} [A-Z]+ [\w.]+: ", re.M)


def start_serve(db_url: str, tmp_path: Path, log: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data"),
        "CLUSTER_MANAGER_LOCAL_MEMORY_MB": "off",
        "CLUSTER_MANAGER_ADMIN_TOKEN": ADMIN_TOKEN,
        "CLUSTER_MANAGER_BENCHMARK_CASE_S": "0.2",
    }
    env.pop("CLUSTER_MANAGER_LOG_LEVEL", None)
    env.pop("CLUSTER_MANAGER_LOG_FORMAT", None)
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cluster_manager", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_until_healthy(http: httpx.Client, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()
        with contextlib.suppress(httpx.TransportError):
            if http.get("/health").status_code == 200:
                return
        time.sleep(0.1)
    pytest.fail(f"serve never answered /health:\n{log.read_text()}")


def job_states(db_url: str, submission_id: int) -> dict[int, str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT id, state FROM jobs WHERE submission_id = %s ORDER BY id", (submission_id,)
        ).fetchall()
    return dict(rows)


def wait_for_states(
    db_url: str, submission_id: int, wanted: set[str], timeout: float, log: Path
) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while True:
        states = job_states(db_url, submission_id)
        if states and set(states.values()) <= wanted:
            return states
        assert time.monotonic() < deadline, f"jobs {states}, log:\n{log.read_text()[-4000:]}"
        time.sleep(0.1)


@pytest.mark.fresh_db("its server processes may outlive it and would claim the next test's jobs")
@pytest.mark.reliability(
    "Faults",
    "`serve` is killed (SIGKILL) while it runs a ranked submission's jobs, then started again",
    "its log follows each job by id: queued and dispatched before the kill, taken over (naming "
    "the dead scheduler) and finished after; no API token, admin token or secret seed in it",
)
def test_a_killed_servers_jobs_are_followed_by_id_through_its_log(
    db_url: str, tmp_path: Path, record_property
):
    created = cli(
        db_url, tmp_path, "leaderboard", "create", "quick", "--task", str(FAST_TASK),
        "--deadline", "2099-01-01", "--gpu", "CPU",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    token = cli(db_url, tmp_path, "user", "token", "alice").stdout.strip()
    assert token.startswith("cm_")
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"

    port = free_port()
    first = start_serve(db_url, tmp_path, first_log, port)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, headers={"X-Popcorn-Cli-Id": token}, timeout=60) as http:
            wait_until_healthy(http, first, first_log)
            # The admin token travels in a request too (never into the log).
            admin = httpx.get(
                f"{base}/admin/stats", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
            )
            assert admin.status_code == 200, admin.text
            accepted = http.post(
                "/submission/quick/CPU/leaderboard",
                files={"file": ("submission.py", SLOW_FIRST_CALL.encode())},
            )
            assert accepted.status_code == 202, accepted.text
            submission_id = accepted.json()["details"]["id"]
        # The public run and the secret re-run, both under way on the local launcher.
        wait_for_states(db_url, submission_id, {"dispatched"}, 60, first_log)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    # A lease lasts 30 s: as if they had run out, so that the next server takes the jobs over
    # on its first pass (this test is about the log, not the clock; test_durability's
    # workers wait for theirs).
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs SET lease_expires_at = now() - interval '1 second' "
            "WHERE state IN ('claimed', 'dispatched')"
        )
        seed = conn.execute("SELECT secret_seed FROM leaderboards WHERE name = 'quick'").fetchone()
    assert seed is not None

    second = start_serve(db_url, tmp_path, second_log, port)
    try:
        states = wait_for_states(db_url, submission_id, {"finished"}, 120, second_log)
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0, second_log.read_text()
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()

    before, after = first_log.read_text(), second_log.read_text()
    record_property(
        "observed",
        " | ".join(
            line.split(": ", 1)[1]
            for line in (before + after).splitlines()
            if re.search(r"job \d+: (queued|dispatched|taken over|finished)", line)
        ),
    )
    (dead_owner,) = re.findall(r"scheduler (\S+) serving CPU", before)
    for job_id in states:
        assert re.search(rf"job {job_id}: queued on CPU, submission {submission_id}", before)
        assert re.search(rf"job {job_id}: dispatched to local run \S+ on CPU", before)
        assert f"job {job_id}: taken over from scheduler {dead_owner}," in after
        assert re.search(rf"job {job_id}: re-attached to local run \S+", after)
        assert re.search(rf"job {job_id}: finished, passed, \d+\.\d s after dispatch", after)
    # uvicorn's lines go through the same handler and format as the app's own.
    posted = rf'^{UTC_TIME} INFO uvicorn\.access: .*"POST /submission/quick/CPU/leaderboard HTTP'
    assert re.search(posted, before, re.M)
    assert all(
        LINE.match(line) or line.startswith((" ", "Traceback")) for line in after.splitlines()
    )
    for secret in (token, ADMIN_TOKEN, str(seed[0])):
        assert secret not in before + after
    assert "Resetting connection" not in after  # the server stopped with nothing half done
    # The runs' folders went once their results were stored.
    assert list((tmp_path / "data" / "runs").iterdir()) == []
