"""A machine that cannot sandbox fully: the run says so, and its score is not ranked."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from cluster_manager.cli.demo_run import _lenient_config
from cluster_manager.core.models import Mode
from cluster_manager.core.sandboxing import (
    ALLOW_SETTING,
    PARTIAL,
    SANDBOX_KEY,
    SANDBOX_REASON_KEY,
    ranking_hold,
)
from cluster_manager.harness import runner
from cluster_manager.sandbox.bwrap import BWRAP_SETTING
from cluster_manager.sandbox.plan import full_sandbox_problem, limits_problem
from cluster_manager.service import Submitter
from cluster_manager.settings import Settings, load_settings, local_limits
from cluster_manager.storage import runs as run_store
from tests.adversarial.helpers import LIMITS, SECRET, small_task
from tests.conftest import CORRECT, make_request
from tests.storage.helpers import (
    ALICE,
    BOB,
    OWNER,
    claim_submission,
    dispatch,
    make_board,
    run_result,
    submit,
)


@pytest.mark.slow
@pytest.mark.reliability(
    "Sandbox",
    "a runner machine without bubblewrap (or without user namespaces) runs a ranked submission",
    "it passes, says sandbox: partial and why, and its score is held back from the ranking",
)
def test_a_partial_sandbox_is_said_in_the_result(tmp_path, monkeypatch, record_property):
    monkeypatch.setenv(BWRAP_SETTING, "off")
    task = small_task(tmp_path / "task")
    result = runner.run(
        make_request(task, CORRECT, Mode.LEADERBOARD, seed=SECRET, limits=LIMITS), isolate=True
    )
    assert result.passed, result.message
    assert result.system[SANDBOX_KEY] == PARTIAL
    assert "bubblewrap" in result.system[SANDBOX_REASON_KEY]
    hold = ranking_hold(result.system, allow_unsandboxed=False)
    assert hold is not None and ALLOW_SETTING in hold
    assert ranking_hold(result.system, allow_unsandboxed=True) is None
    record_property("observed", hold)


def _partial(result):
    system = {SANDBOX_KEY: PARTIAL, SANDBOX_REASON_KEY: "user namespaces are disabled"}
    return dataclasses.replace(result, system=system)


async def _rank_pair(service, pool, *, allow: bool, user: Submitter) -> list[str]:
    receipt = await submit(service, "board", user, gpus=["CPU"])
    jobs = await claim_submission(pool, receipt.submission_id)
    for (_, secret), job in jobs.items():
        job = await dispatch(pool, job)
        result = _partial(run_result(True, 2.0 if secret else 1.0))
        async with pool.acquire() as conn:
            assert await run_store.record_run(
                conn, job=job, owner=OWNER, result=result, allow_unsandboxed=allow
            )
    return [e.user for e in (await service.leaderboards.ranking("board", "CPU"))["CPU"]]


@pytest.mark.reliability(
    "Sandbox",
    "recording a passing ranked pair whose runs say sandbox: partial",
    "stored, not ranked; ranked only with CLUSTER_MANAGER_ALLOW_UNSANDBOXED_RANKING=1",
)
async def test_partial_runs_are_stored_but_not_ranked(service, pool, record_property):
    await make_board(service, gpus=["CPU"])
    assert await _rank_pair(service, pool, allow=False, user=ALICE) == []
    assert await _rank_pair(service, pool, allow=True, user=BOB) == ["bob"]
    record_property("observed", "not ranked by default; ranked with the operator's setting")


def test_the_operator_setting_is_off_unless_named():
    assert not load_settings({}, dotenv_path=None).allow_unsandboxed_ranking
    assert load_settings({ALLOW_SETTING: "1"}, dotenv_path=None).allow_unsandboxed_ranking
    with pytest.raises(Exception, match=ALLOW_SETTING):
        load_settings({ALLOW_SETTING: "maybe"}, dotenv_path=None)


def test_the_demo_ranks_partial_runs_only_in_its_embedded_database(monkeypatch):
    monkeypatch.setenv(BWRAP_SETTING, "off")
    said: list[str] = []
    limits = local_limits(Settings())
    embedded = SimpleNamespace(embedded=True, settings=Settings(), local_limits=lambda: limits)
    config = _lenient_config(embedded, said.append)  # type: ignore[arg-type]
    assert config is not None and config.allow_unsandboxed_ranking
    assert ALLOW_SETTING in said[0] and "embedded database only" in said[0]
    shared = SimpleNamespace(embedded=False, settings=Settings(), local_limits=lambda: limits)
    assert _lenient_config(shared, said.append) is None  # type: ignore[arg-type]
    monkeypatch.delenv(BWRAP_SETTING)
    if full_sandbox_problem() is None and limits_problem() is None:  # ranks as usual
        assert _lenient_config(embedded, said.append) is None  # type: ignore[arg-type]
