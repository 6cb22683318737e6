"""One shape's time driven towards zero collapses a geometric mean: a task states the fastest
time each benchmark can physically take, and a ranked score below it is held for review."""

from __future__ import annotations

import dataclasses

import pytest

from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.models import Mode
from cluster_manager.core.sandboxing import ranking_hold
from cluster_manager.core.task import load_task
from cluster_manager.harness import runner
from cluster_manager.storage import runs as run_store
from tests.adversarial.helpers import IDENTITY_REFERENCE, LIMITS, SECRET
from tests.conftest import CORRECT, make_request, write_task
from tests.storage.helpers import (
    ALICE,
    OWNER,
    claim_submission,
    dispatch,
    make_board,
    run_result,
    submit,
)

# The small case claims a floor no copy of 4 KiB can beat on any machine (1 s): an honest
# kernel stands in for one whose time on that shape was driven to nothing.
BENCHMARKS = [
    {"size": 1024, "seed": 3, "min_time_us": 1_000_000},
    {"size": 65536, "seed": 4},
]


def _task(tmp_path):
    extra = {"ranking_by": "geom", "benchmark_timeout": 4, "ranked_timeout": 6}
    directory = tmp_path / "floor"
    write_task(directory, reference=IDENTITY_REFERENCE, benchmarks=BENCHMARKS, extra=extra)
    return load_task(directory)


def test_the_floor_is_the_tasks_not_a_case_parameter(tmp_path):
    task = _task(tmp_path)
    assert task.floors_us == (1_000_000.0, None)
    assert all("min_time_us" not in case for case in task.benchmarks)
    bad = [{"size": 8, "seed": 1, "min_time_us": -3}]
    with pytest.raises(InvalidTaskError, match=r"benchmarks\[0\]\.min_time_us"):
        load_task(write_task(tmp_path / "bad", benchmarks=bad))


@pytest.mark.slow
@pytest.mark.adversarial
@pytest.mark.reliability(
    "Anti-cheat",
    "a ranked score whose benchmark is faster than the task's physical floor (min_time_us), "
    "collapsing a geometric mean",
    "the run passes, its score is held for an admin's review and not ranked",
)
def test_a_score_below_the_physical_floor_is_held_for_review(tmp_path, record_property):
    request = make_request(_task(tmp_path), CORRECT, Mode.LEADERBOARD, seed=SECRET, limits=LIMITS)
    result = runner.run(request, isolate=True)
    assert result.passed, result.message
    assert result.score is not None
    assert result.review.startswith("held for review: benchmark 0 took")
    assert ranking_hold(result.system, allow_unsandboxed=True, review=result.review)
    record_property("observed", result.review)


async def test_a_pair_held_for_review_is_stored_but_not_ranked(service, pool):
    await make_board(service, gpus=["CPU"])
    receipt = await submit(service, "board", ALICE, gpus=["CPU"])
    jobs = await claim_submission(pool, receipt.submission_id)
    for job in jobs.values():
        held = dataclasses.replace(run_result(True, 1e-9), review="held for review: too fast")
        async with pool.acquire() as conn:
            stored = await run_store.record_run(
                conn,
                job=await dispatch(pool, job),
                owner=OWNER,
                result=held,
                allow_unsandboxed=True,
            )
        assert stored
    assert (await service.leaderboards.ranking("board", "CPU"))["CPU"] == []
