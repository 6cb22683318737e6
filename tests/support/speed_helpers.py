"""Shortcuts for the speed-of-light tests of the front ends: a registry with a GPU type that
states published peaks (run by the local launcher, so nothing is refused as unserved), the
shipped vectoradd example on it, and ranked runs whose cases carry their figures, stored
without a runner."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from cluster_manager.app import App
from cluster_manager.core import protocol
from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode, Task, Verdict
from cluster_manager.core.run_results import BenchmarkOutcome, PhaseOutcome, RunResult
from cluster_manager.core.scoring import score_seconds
from cluster_manager.core.speed_of_light import Peaks, case_speed, speed_review
from cluster_manager.core.task import load_task
from cluster_manager.service import SubmissionReceipt, Submitter
from cluster_manager.storage import runs as run_store
from tests.conftest import EXAMPLES
from tests.storage.helpers import OWNER, claim_submission, dispatch
from tests.support.fakes import SANDBOXED

H100 = Peaks(
    3350.0,
    {"fp64": 67.0, "fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
)
VECTORADD = EXAMPLES / "vectoradd_py"
SPEED_BOARD = "vectoradd"


def speed_registry() -> GpuRegistry:
    """The API tests' two CPU types, and an "H100" with the published peaks."""
    return GpuRegistry(
        {
            "CPU": GpuType("CPU", "local", max_concurrent=2, devices=2),
            "CPU2": GpuType("CPU2", "local", max_concurrent=1, devices=2),
            "H100": GpuType("H100", "local", max_concurrent=1, peaks=H100),
        }
    )


async def speed_board(app: App) -> Task:
    task = load_task(VECTORADD)
    await app.service.leaderboards.create(
        SPEED_BOARD,
        task,
        datetime(2099, 1, 1, tzinfo=UTC),
        ["H100", "CPU"],
        creator=Submitter("org", "org"),
    )
    return task


def ranked_result(task: Task, means_ns: Sequence[float], peaks: Peaks | None) -> RunResult:
    """A ranked run that passed with these means, each case's figures and the review of
    them as the runner sets them."""
    benchmarks = tuple(
        BenchmarkOutcome(
            i,
            protocol.format_case(case),
            True,
            runs=100,
            mean=mean,
            err=mean / 100,
            best=mean * 0.9,
            worst=mean * 1.2,
            speed=case_speed(task.speed_of_light, case, mean, peaks),
        )
        for i, (case, mean) in enumerate(zip(task.benchmarks, means_ns, strict=True))
    )
    phase = PhaseOutcome("leaderboard", 0, False, 1.0, "", "", Verdict.PASSED, "", (), benchmarks)
    return RunResult(
        True,
        Verdict.PASSED,
        Mode.LEADERBOARD,
        "",
        (phase,),
        score=score_seconds(means_ns, task.ranking_by),
        system=dict(SANDBOXED),
        review=speed_review({b.index: b.speed for b in benchmarks if b.speed}),
    )


async def rank_with_figures(
    app: App, user: str, means_ns: Sequence[float], gpu: str = "H100"
) -> SubmissionReceipt:
    """A ranked submission of `user` on the vectoradd board, both its runs stored."""
    task = load_task(VECTORADD)
    receipt = await app.service.submissions.submit(
        SPEED_BOARD,
        Submitter(user, user),
        "submission.py",
        (VECTORADD / "submission.py").read_bytes(),
        gpus=[gpu],
        mode=Mode.LEADERBOARD,
    )
    peaks = app.registry.get(gpu).peaks
    for job in (await claim_submission(app.pool, receipt.submission_id)).values():
        job = await dispatch(app.pool, job)
        async with app.pool.acquire() as conn:
            result = ranked_result(task, means_ns, peaks)
            assert await run_store.record_run(conn, job=job, owner=OWNER, result=result)
    return receipt
