"""What a run's sandbox means for its score and its report."""

from __future__ import annotations

from cluster_manager.core.models import Mode, Verdict
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.sandboxing import (
    ALLOW_SETTING,
    FULL,
    LIMITS_KEY,
    PARTIAL,
    RLIMITS_ONLY,
    SANDBOX_KEY,
    SANDBOX_REASON_KEY,
    describe,
    ranking_hold,
)
from cluster_manager.rendering.reports import format_report

PARTIAL_SYSTEM = {SANDBOX_KEY: PARTIAL, SANDBOX_REASON_KEY: "user namespaces are disabled"}


def test_only_a_full_sandbox_is_ranked_without_the_operators_consent():
    assert ranking_hold({SANDBOX_KEY: FULL}, allow_unsandboxed=False) is None
    hold = ranking_hold(PARTIAL_SYSTEM, allow_unsandboxed=False)
    assert hold is not None
    assert "user namespaces are disabled" in hold and ALLOW_SETTING in hold
    assert ranking_hold(PARTIAL_SYSTEM, allow_unsandboxed=True) is None
    # A runner that says nothing about its sandbox is not trusted either.
    assert "did not report" in (ranking_hold({}, allow_unsandboxed=False) or "")


def test_the_report_of_a_ranked_run_says_how_it_was_sandboxed():
    result = RunResult(True, Verdict.PASSED, Mode.LEADERBOARD, "ok", score=1e-3)
    partial = format_report(RunResult(**{**result.__dict__, "system": PARTIAL_SYSTEM}))
    assert describe(PARTIAL_SYSTEM) in partial.splitlines()
    full = format_report(RunResult(**{**result.__dict__, "system": {SANDBOX_KEY: FULL}}))
    assert "sandbox: full" in full.splitlines()


def test_a_run_bounded_by_rlimits_only_is_held_back_like_a_partial_sandbox():
    rlimits = {SANDBOX_KEY: FULL, LIMITS_KEY: f"{RLIMITS_ONLY} (no cgroup delegated)"}
    hold = ranking_hold(rlimits, allow_unsandboxed=False)
    assert hold is not None and "no cgroup delegated" in hold and ALLOW_SETTING in hold
    assert ranking_hold(rlimits, allow_unsandboxed=True) is None
    grouped = {SANDBOX_KEY: FULL, LIMITS_KEY: "cgroup v2: memory, processes"}
    assert ranking_hold(grouped, allow_unsandboxed=False) is None
    assert describe(rlimits) == f"sandbox: full; limits: {RLIMITS_ONLY} (no cgroup delegated)"
