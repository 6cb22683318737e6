"""A `cluster-manager serve` process over a benchmark's database, and timing calls to it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def served(database_url: str, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The API server (no scheduler) on a free loopback port; yields its URL and process."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cm-bench-api-") as data_dir:
        environment = {
            **os.environ,
            "DATABASE_URL": database_url,
            "CLUSTER_MANAGER_DATA_DIR": data_dir,
            "CLUSTER_MANAGER_API_RATE_LIMIT_PER_MINUTE": "1000000",
            **env,
        }
        command = [sys.executable, "-m", "cluster_manager", "serve", "--no-scheduler"]
        server = subprocess.Popen(
            [*command, "--port", str(port)],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=Path(data_dir),
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, server)
            yield url, server
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the API server exited with {server.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the API server did not answer within {READY_TIMEOUT_S:g} s")


async def time_gets(client: httpx.AsyncClient, path: str, calls: int, warm_up: int) -> list[float]:
    """Milliseconds of `calls` sequential GETs of `path`, after `warm_up` untimed ones."""
    for _ in range(warm_up):
        (await client.get(path)).raise_for_status()
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        answer = await client.get(path)
        times.append((time.perf_counter() - began) * 1000)
        answer.raise_for_status()
    return times


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")
