"""The speed of light in the API's JSON, in fields of its own (popcorn-cli reads the others
field for field and must keep working): the task's formulas, each ranked score's fraction of
the GPU type's peaks, and each timed case's achieved rates and fraction of peak."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from cluster_manager.api.models.runs import key_form
from cluster_manager.app import App
from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.speed_of_light import floor_ns
from tests.api.conftest import BOARD, IDENTITY, popcorn_headers, token_of
from tests.support.speed_helpers import (
    H100,
    SPEED_BOARD,
    rank_with_figures,
    speed_board,
    speed_registry,
)


@pytest.fixture
def api_registry() -> GpuRegistry:
    return speed_registry()


async def details_of(client: httpx.AsyncClient, token: str, submission_id: int) -> dict:
    for _ in range(1200):
        answer = await client.get(
            f"/user/submissions/{submission_id}", headers=popcorn_headers(token)
        )
        assert answer.status_code == 200, answer.text
        if answer.json()["done"]:
            return answer.json()
        await asyncio.sleep(0.1)
    raise AssertionError(f"submission {submission_id} did not finish")


async def test_a_task_shows_its_formulas(app: App, client: httpx.AsyncClient):
    await speed_board(app)
    task = (await client.get(f"/leaderboards/{SPEED_BOARD}/task")).json()
    assert task["speed_of_light"] == {
        "bytes": "3 * size * size * 2",
        "flops": "size * size",
        "precision": "fp16",
    }
    identity = (await client.get(f"/leaderboards/{BOARD}/task")).json()
    assert identity["speed_of_light"] == {"bytes": "2 * size * 4", "flops": None, "precision": None}


async def test_a_ranking_gives_each_scores_fraction_of_peak(app: App, client: httpx.AsyncClient):
    task = await speed_board(app)
    floors = [floor_ns(task.speed_of_light, case, H100) for case in task.benchmarks]
    await rank_with_figures(app, "alice", [floor * 4 for floor in floors])  # 25 % each
    view = (await client.get(f"/leaderboards/{SPEED_BOARD}")).json()
    (entry,) = view["rankings"]["H100"]
    assert entry["fraction_of_peak"] == pytest.approx(0.25)
    # popcorn-cli's fields are all still there, as they were.
    assert {"rank", "user", "score", "submission_id", "submission_time"} <= set(entry)
    assert view["peaks"] == {"H100": H100.to_json()}  # CPU has none published
    # A board whose GPU types state no peaks: null, not a guess.
    await rank_with_figures(app, "bob", [floor * 4 for floor in floors], gpu="CPU")
    (cpu_entry,) = (await client.get(f"/leaderboards/{SPEED_BOARD}")).json()["rankings"]["CPU"]
    assert cpu_entry["fraction_of_peak"] is None


async def test_a_runs_cases_carry_their_figures(app: App, client: httpx.AsyncClient):
    task = await speed_board(app)
    means = [floor_ns(task.speed_of_light, case, H100) * 4 for case in task.benchmarks]
    receipt = await rank_with_figures(app, "alice", means)
    details = await details_of(client, await token_of(app, "alice"), receipt.submission_id)
    public = next(r for r in details["runs"] if not r["secret"])
    figures = public["speed_of_light"]
    assert [(f["phase"], f["index"]) for f in figures] == [("leaderboard", i) for i in range(3)]
    first = figures[0]
    assert first["spec"] == "size: 256; seed: 54352"
    assert first["bytes"] == 3 * 256 * 256 * 2 and first["flops"] == 256 * 256
    assert first["bandwidth_gbs"] == pytest.approx(first["bytes"] / means[0])
    assert first["fraction_of_peak"] == pytest.approx(0.25) and first["bound"] == "memory"
    assert first["peak_gbs"] == 3350 and first["peak_tflops"] == 989.4
    assert first["precision"] == "fp16" and first["measured_peaks"] is False
    # The protocol's key form is the same as without figures: popcorn-cli reads it as before.
    stored = RunResult.from_json(public["run_result"])
    assert public["result"] == key_form(stored)
    assert not any("speed" in key or "peak" in key for key in public["result"])
    assert "Speed of light (leaderboard phase)" in details["report"]
    secret = next(r for r in details["runs"] if r["secret"])
    assert "speed_of_light" not in secret  # a secret run shows its verdict only


async def test_a_case_over_100_percent_of_peak_is_not_a_success(
    app: App, client: httpx.AsyncClient
):
    """The physical-floor review on the same numbers: a case faster than its floor holds the
    score for review, so the ranking leaves it out and the client is told why."""
    task = await speed_board(app)
    means = [floor_ns(task.speed_of_light, case, H100) * 0.5 for case in task.benchmarks]
    receipt = await rank_with_figures(app, "mallory", means)
    details = await details_of(client, await token_of(app, "mallory"), receipt.submission_id)
    assert details["job"]["status"] == "failed"
    assert details["job"]["error"].startswith(
        "H100: held for review: benchmark 0 ran at 200% of the GPU's peak memory bandwidth"
    )
    public = next(r for r in details["runs"] if not r["secret"])
    assert public["speed_of_light"][0]["fraction_of_peak"] == pytest.approx(2.0)
    assert (await client.get(f"/leaderboards/{SPEED_BOARD}")).json()["rankings"]["H100"] == []


@pytest.mark.usefixtures("scheduler")
async def test_a_cpu_run_reports_figures_against_its_machines_measured_peaks(
    app: App, client: httpx.AsyncClient
):
    token = await token_of(app, "alice")
    accepted = await client.post(
        f"/submission/{BOARD}/CPU/benchmark",
        headers=popcorn_headers(token),
        files={"file": ("submission.py", (IDENTITY / "submission.py").read_bytes())},
    )
    assert accepted.status_code == 202, accepted.text
    details = await details_of(client, token, accepted.json()["details"]["id"])
    (run,) = details["runs"]
    assert run["passed"], run
    figures = run["speed_of_light"]
    assert [f["index"] for f in figures] == [0, 1]
    for figure in figures:
        assert figure["measured_peaks"] is True and figure["bandwidth_gbs"] > 0
        assert figure["fraction_of_peak"] > 0 and figure["bound"] == "memory"
        assert figure["flops"] == 0 and figure["peak_tflops"] is None  # identity: bytes only
