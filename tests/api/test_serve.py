"""`cluster-manager serve` and `cluster-manager user token` as an organiser runs them: real
processes over a real database, the server hosting its own scheduler."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.api.conftest import IDENTITY, source


def cli(db_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_manager", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(db_url, tmp_path),
    )


def _env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": db_url,
        "CLUSTER_MANAGER_DATA_DIR": str(tmp_path / "data"),
        "CLUSTER_MANAGER_LOCAL_MEMORY_MB": "off",
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# A real run: `serve` is a process of its own, with the launchers it builds itself.
def test_a_served_submission_runs_on_the_servers_own_scheduler(db_url: str, tmp_path: Path):
    created = cli(
        db_url,
        tmp_path,
        "leaderboard",
        "create",
        "identity",
        "--task",
        str(IDENTITY),
        "--deadline",
        "2099-01-01",
        "--gpu",
        "CPU",
    )
    assert created.returncode == 0, created.stderr
    issued = cli(db_url, tmp_path, "user", "token", "alice")
    assert issued.returncode == 0, issued.stderr
    token = issued.stdout.strip()
    assert token.startswith("cm_") and "shown once" in issued.stderr

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cluster_manager", "serve", "--port", str(port)],
        env=_env(db_url, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        # Long timeouts: the server runs the submission in a sandbox beside its answers.
        with httpx.Client(base_url=base, headers={"X-Popcorn-Cli-Id": token}, timeout=60) as http:
            started = time.monotonic()
            while time.monotonic() - started < 120:
                with contextlib.suppress(httpx.TransportError):
                    if http.get("/health").status_code == 200:
                        break
                time.sleep(0.1)
            accepted = http.post(
                "/submission/identity/CPU/test", files={"file": ("submission.py", source())}
            )
            assert accepted.status_code == 202, accepted.text
            submission_id = accepted.json()["details"]["id"]
            while time.monotonic() - started < 240:
                details = http.get(f"/user/submissions/{submission_id}").json()
                if details["done"]:
                    break
                time.sleep(0.1)
            assert details["job"]["status"] == "succeeded", details
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=30)
        assert server.returncode == 0, output
        assert token not in output  # the access log shows paths, never credentials
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

    revoked = cli(db_url, tmp_path, "user", "token", "alice", "--revoke")
    assert revoked.stdout.strip() == "revoked the token of alice"
    nobody = cli(db_url, tmp_path, "user", "token", "nobody", "--revoke")
    assert nobody.stdout.strip() == "nobody had no token"
