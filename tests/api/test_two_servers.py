"""Two `cluster-manager serve` processes on one database, as behind a load balancer: a
submission made through one is followed live and read through the other, which runs no
scheduler and so learns of its progress only from the database."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import IDENTITY, source
from tests.api.test_serve import _env, cli, free_port


@contextlib.contextmanager
def serving(db_url: str, tmp_path: Path, *args: str) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cluster_manager", "serve", "--port", str(port), *args],
        env=_env(db_url, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while time.monotonic() - started < 120:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            assert server.poll() is None, server.communicate()[0]
            time.sleep(0.1)
        yield base
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def events(http: httpx.Client, submission_id: int) -> Iterator[tuple[str, dict]]:
    """The submission's server-sent events, as (event, data), until `done`."""
    with http.stream("GET", f"/submissions/{submission_id}/events") as stream:
        assert stream.status_code == 200
        kind = ""
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kind = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                yield kind, json.loads(line.removeprefix("data:"))
                if kind == "done":
                    return


@pytest.mark.reliability(
    "Faults",
    "two API servers on one database, the scheduler in the one submitted to only",
    "the other follows the submission live (every job event, then done) and reads its result",
)
def test_submit_through_one_server_follow_and_read_through_another(
    db_url: str, tmp_path: Path, record_property
):
    created = cli(
        db_url, tmp_path, "leaderboard", "create", "identity", "--task", str(IDENTITY),
        "--deadline", "2099-01-01", "--gpu", "CPU",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    token = cli(db_url, tmp_path, "user", "token", "alice").stdout.strip()
    headers = {"X-Popcorn-Cli-Id": token}
    with (
        serving(db_url, tmp_path) as with_scheduler,
        serving(db_url, tmp_path, "--no-scheduler") as without,
        httpx.Client(base_url=with_scheduler, headers=headers, timeout=60) as first,
        httpx.Client(base_url=without, headers=headers, timeout=240) as second,
    ):
        assert second.get("/health").json()["served_gpus"] == ["CPU"]  # said by the other
        accepted = first.post(
            "/submission/identity/CPU/test", files={"file": ("submission.py", source())}
        )
        assert accepted.status_code == 202, accepted.text
        submission_id = accepted.json()["details"]["id"]
        seen = list(events(second, submission_id))
        details = second.get(f"/user/submissions/{submission_id}").json()
    kinds = [kind for kind, _ in seen]
    states = [data.get("state") for kind, data in seen if kind == "job"]
    record_property("observed", f"events through the other server: {states} then {kinds[-1]}")
    assert kinds[-1] == "done"
    assert "running" in states and states[-1] == "finished"
    assert details["done"] and details["job"]["status"] == "succeeded", details
