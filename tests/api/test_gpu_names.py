"""GPU type names through the server as on a database: any case is the board's own name, and
a typo hears what it likely meant, from the board's types or else the registry's, as `eval
--gpu` says; what the server's registry has but the board does not run on says what it
does."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from cluster_manager.app import App
from cluster_manager.core.gpus import GpuRegistry, GpuType
from tests.api.conftest import BOARD, IDENTITY, popcorn_headers, source, token_of
from tests.api.test_remote_cli import run_cli


@pytest.fixture
def api_registry() -> GpuRegistry:
    """The server's registry: a type no board here runs on besides the board's two."""
    return GpuRegistry(
        {
            "CPU": GpuType("CPU", "local", max_concurrent=2, devices=2),
            "CPU2": GpuType("CPU2", "local", max_concurrent=1, devices=2),
            "H100": GpuType("H100", "local", max_concurrent=1),
        }
    )


async def test_a_mistyped_gpu_hears_what_it_likely_meant(app: App, live_url: str, tmp_path: Path):
    token = await token_of(app, "alice")
    solution = str(IDENTITY / "submission.py")
    cases = {
        "h10": f"unknown GPU type 'h10'; did you mean H100? ({BOARD!r} runs on CPU, CPU2)",
        "H100": f"{BOARD!r} does not run on 'H100'; choose from CPU, CPU2",
        "zzz": f"{BOARD!r} does not run on 'zzz'; choose from CPU, CPU2",
    }
    for gpu, message in cases.items():
        done = await run_cli(
            "submit", BOARD, solution, "--gpu", gpu, url=live_url, token=token, cwd=tmp_path
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"error: {message}", gpu
    assert await app.pool.fetchval("SELECT count(*) FROM submissions") == 0


async def test_a_gpu_in_another_case_is_the_boards_own(app: App, client: httpx.AsyncClient):
    alice = popcorn_headers(await token_of(app, "alice"))
    answer = await client.post(
        f"/submission/{BOARD}/cpu2/test", headers=alice, files={"file": ("s.py", source())}
    )
    assert answer.status_code == 202, answer.text
    assert await app.pool.fetchval("SELECT array_agg(gpu) FROM jobs") == ["CPU2"]
    ranking = await client.get(f"/leaderboards/{BOARD}", params={"gpu": "cpu2"})
    assert ranking.status_code == 200, ranking.text
    assert list(ranking.json()["rankings"]) == ["CPU2"], ranking.text
