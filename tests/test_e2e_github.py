"""A submission end to end through GitHub Actions: service -> queue -> scheduler -> GitHub
launcher (real PyGithub over HTTP) -> fake GitHub whose runner executes the entrypoint ->
result artifact -> database -> ranking; and faults at the fake that must never lose a job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.records import JobState
from cluster_manager.launchers.github import GitHubLauncher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, Submitter
from cluster_manager.storage.database import create_pool
from cluster_manager.storage.installation import installation_id
from tests.conftest import CORRECT, load_task, write_task
from tests.support import database
from tests.support.fake_github import FakeGitHub

REGISTRY = GpuRegistry(
    {
        "B200": GpuType(
            "B200",
            "github",
            max_concurrent=4,
            params={"workflow": "nvidia_workflow.yml", "runner_labels": ["self-hosted", "b200"]},
        )
    }
)
CONFIG = SchedulerConfig(lease_s=30, heartbeat_s=5, poll_s=0.1)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        yield fake


@pytest.fixture
def launcher(github: FakeGitHub) -> Iterator[GitHubLauncher]:
    made = GitHubLauncher(
        github.full_name,
        ["t1", "t2"],
        base_url=github.base_url,
        poll_interval=0.3,
        write_interval=0.0,
        payload_key=github.payload_key,
    )
    yield made
    made.close_clients()


@pytest.fixture
async def other_pool(pg_server: str) -> AsyncIterator:
    """A second installation: a database of its own, migrated from scratch."""
    name = database.create_template(pg_server, "other")
    pool = await create_pool(database._with_database(pg_server, name))
    yield pool
    await pool.close()
    database.drop(pg_server, name)


async def _board(pool, clock, tmp_path, **task_options) -> Service:
    service = Service(pool, REGISTRY, clock=clock)
    task = load_task(write_task(tmp_path / "task", extra=task_options or None))
    await service.leaderboards.create("gh", task, clock.now + timedelta(days=1), ["B200"])
    return service


async def _serve(pool, launcher, job_ids, timeout=120) -> None:
    scheduler = Scheduler(pool, REGISTRY, {"github": launcher}, config=CONFIG)
    await asyncio.wait_for(scheduler.run_until_idle(job_ids), timeout)


async def test_ranked_submission_through_github_lands_in_the_ranking(
    pool, clock, tmp_path, github, launcher
):
    service = await _board(pool, clock, tmp_path)
    receipt = await service.submissions.submit(
        "gh", Submitter("alice", "alice"), "s.py", CORRECT.encode(), mode=Mode.LEADERBOARD
    )
    await _serve(pool, launcher, {j.id for j in receipt.jobs})

    report = await service.submissions.report(receipt.submission_id)
    assert [j.state for j in report.jobs] == [JobState.FINISHED, JobState.FINISHED]
    assert all(r.passed for r in report.runs)
    # The public run's score is shown; the secret re-run's never is.
    assert [r.score is not None for r in report.runs] == [not r.secret for r in report.runs]
    # The stored external ids are GitHub's run ids, not the dispatch keys.
    assert all(j.external_id and j.external_id.isdigit() for j in report.jobs)
    assert len(github.runs) == 2  # public and secret: one run each, never twice
    ranking = await service.leaderboards.ranking("gh")
    assert [(e.rank, e.user) for e in ranking["B200"]] == [(1, "alice")]


@pytest.mark.reliability(
    "Faults",
    "3 submissions through the scheduler while GitHub answers a 502 burst and one token is limited",
    "every job ends with its passed result: none lost, none run twice",
)
async def test_faults_at_github_end_in_results_never_lost_jobs(
    pool, clock, tmp_path, github, launcher, record_property
):
    service = await _board(pool, clock, tmp_path)
    github.canned = None
    receipts = [
        await service.submissions.submit(
            "gh", Submitter(f"u{i}", f"u{i}"), "s.py", CORRECT.encode(), mode=Mode.TEST
        )
        for i in range(3)
    ]
    github.fail_next(3, status=502)  # a 5xx burst on whatever comes first
    github.rate_limit_for(5, token="t1")  # and one token rate-limited for a while
    await _serve(pool, launcher, {j.id for r in receipts for j in r.jobs})
    reports = [await service.submissions.report(r.submission_id) for r in receipts]
    record_property(
        "observed",
        f"verdicts {[[r.verdict.value for r in report.runs] for report in reports]}; "
        f"{len(github.runs)} GitHub runs after {len(github.requests(status=502))} 502 and "
        f"{len(github.requests(status=403))} 403 answers",
    )
    for report in reports:
        assert [r.verdict for r in report.runs] == [Verdict.PASSED]


@pytest.mark.reliability(
    "Faults",
    "a submission whose GitHub run no runner ever picks up",
    "a timeout verdict saying no result came in time; the run is cancelled on GitHub",
)
async def test_a_run_stuck_in_the_queue_ends_as_a_clear_timeout(
    pool, clock, tmp_path, github, launcher, monkeypatch, record_property
):
    import cluster_manager.core.phases as plan

    monkeypatch.setattr(plan, "RUN_OVERHEAD_S", 0.0)
    service = await _board(pool, clock, tmp_path, test_timeout=2)
    github.stuck = True
    receipt = await service.submissions.submit(
        "gh", Submitter("a", "a"), "s.py", CORRECT.encode(), mode=Mode.TEST
    )
    await _serve(pool, launcher, {j.id for j in receipt.jobs}, timeout=60)
    report = await service.submissions.report(receipt.submission_id)
    record_property(
        "observed",
        "; ".join(f"{r.verdict.value}: {r.result.get('message')}" for r in report.runs)
        + f"; {github.count('cancel')} cancel sent",
    )
    assert [r.verdict for r in report.runs] == [Verdict.TIMEOUT]
    assert "no result within" in report.runs[0].result["message"]
    assert github.count("cancel") == 1


@pytest.mark.reliability(
    "Faults",
    "two installations (two databases, e.g. staging and production or a database made anew) "
    "share one runner repository; both dispatch their job 1, attempt 1",
    "each dispatches a run of its own and records its own result: no run of one installation "
    "is taken for the other's",
)
async def test_installations_sharing_a_repository_never_take_each_others_runs(
    pool, other_pool, clock, tmp_path, github, record_property
):
    wrong = "def custom_kernel(data):\n    return data * 2\n"
    verdicts = []
    for db, code in ((pool, wrong), (other_pool, CORRECT)):
        service = await _board(db, clock, tmp_path)
        receipt = await service.submissions.submit(
            "gh", Submitter("a", "a"), "s.py", code.encode(), mode=Mode.TEST
        )
        # Each installation has a launcher of its own (a process of its own) on the same repo.
        launcher = GitHubLauncher(
            github.full_name,
            ["t1"],
            base_url=github.base_url,
            poll_interval=0.3,
            write_interval=0.0,
            payload_key=github.payload_key,
        )
        try:
            await _serve(db, launcher, {j.id for j in receipt.jobs})
        finally:
            await launcher.close()
        (run,) = (await service.submissions.report(receipt.submission_id)).runs
        verdicts.append(run.verdict)
    ids = {await installation_id(pool), await installation_id(other_pool)}
    names = sorted(run.job_id for run in github.runs.values())
    record_property("observed", f"verdicts {[v.value for v in verdicts]}; GitHub runs {names}")
    assert len(ids) == 2
    assert verdicts == [Verdict.WRONG_ANSWER, Verdict.PASSED]
    assert len(github.runs) == 2  # the second installation dispatched a run of its own
    assert all(any(i in name for i in ids) for name in names)
