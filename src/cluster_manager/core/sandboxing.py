"""How far a run was sandboxed, as its RunResult says, and what that means for its score.

A score is only worth something if the submission could not read the secret seed, other
runs or the machine's secrets. A run the machine could not fully sandbox still gets its
verdict, but its score is held back unless the operator accepts the risk by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SANDBOX_KEY = "sandbox"  # in RunResult.system
SANDBOX_REASON_KEY = "sandbox_reason"
FULL = "full"
PARTIAL = "partial"
ALLOW_SETTING = "CLUSTER_MANAGER_ALLOW_UNSANDBOXED_RANKING"


def fully_sandboxed(system: Mapping[str, Any]) -> bool:
    return system.get(SANDBOX_KEY) == FULL


def describe(system: Mapping[str, Any]) -> str:
    """One line for reports and health checks: how far the run was sandboxed, and why not."""
    if fully_sandboxed(system):
        return "sandbox: full"
    return f"sandbox: partial ({system.get(SANDBOX_REASON_KEY) or 'not reported'})"


def policy(allow_unsandboxed: bool) -> str:
    """What happens to the scores of runs that were not fully sandboxed."""
    if allow_unsandboxed:
        return f"scores of partially sandboxed runs are ranked ({ALLOW_SETTING}=1)"
    return f"scores of partially sandboxed runs are held back ({ALLOW_SETTING} is off)"


def ranking_hold(
    system: Mapping[str, Any], *, allow_unsandboxed: bool, review: str = ""
) -> str | None:
    """Why a passing ranked run is stored but not ranked; None when it may be ranked."""
    if review:
        return review
    if allow_unsandboxed or fully_sandboxed(system):
        return None
    reason = system.get(SANDBOX_REASON_KEY) or "the runner did not report its sandbox"
    return (
        f"not ranked: the run was not fully sandboxed ({reason}); "
        f"the operator may accept such runs with {ALLOW_SETTING}=1"
    )
