"""How far a run was sandboxed, as its RunResult says, and what that means for its score.

A score is only worth something if the submission could not read the secret seed, other
runs or the machine's secrets, nor starve the runs beside it. A run the machine could not fully
sandbox, or could bound only with rlimits (which miss memfd, shmem and tmpfs), still gets its
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
LIMITS_KEY = "limits"  # what bounds memory and processes: a cgroup, or rlimits only (why)
DISK_KEY = "disk"  # the run's writable space
RLIMITS_ONLY = "rlimits only"


def rlimits_only(system: Mapping[str, Any]) -> bool:
    """Only a runner that reports its limits can say they are rlimits only."""
    return str(system.get(LIMITS_KEY, "")).startswith(RLIMITS_ONLY)


def fully_sandboxed(system: Mapping[str, Any]) -> bool:
    return system.get(SANDBOX_KEY) == FULL


def describe(system: Mapping[str, Any]) -> str:
    """One line for reports and health checks: how far the run was sandboxed, and why not."""
    if fully_sandboxed(system):
        line = "sandbox: full"
    else:
        line = f"sandbox: partial ({system.get(SANDBOX_REASON_KEY) or 'not reported'})"
    if LIMITS_KEY in system:
        line += f"; limits: {system[LIMITS_KEY]}"
    return line


def policy(allow_unsandboxed: bool) -> str:
    """What happens to the scores of runs that were not fully sandboxed or not bounded by a
    cgroup (`ranking_hold`)."""
    runs = "partially sandboxed runs and of runs bounded by rlimits only"
    if allow_unsandboxed:
        return f"scores of {runs} are ranked ({ALLOW_SETTING}=1)"
    return f"scores of {runs} are held back ({ALLOW_SETTING} is off)"


def ranking_hold(
    system: Mapping[str, Any], *, allow_unsandboxed: bool, review: str = ""
) -> str | None:
    """Why a passing ranked run is stored but not ranked; None when it may be ranked."""
    if review:
        return review
    if allow_unsandboxed:
        return None
    if not fully_sandboxed(system):
        reason = system.get(SANDBOX_REASON_KEY) or "the runner did not report its sandbox"
        return (
            f"not ranked: the run was not fully sandboxed ({reason}); "
            f"the operator may accept such runs with {ALLOW_SETTING}=1"
        )
    if rlimits_only(system):
        return (
            f"not ranked: the run's memory and processes were bounded by rlimits only "
            f"({system[LIMITS_KEY]}); the operator may accept such runs with {ALLOW_SETTING}=1"
        )
    return None
