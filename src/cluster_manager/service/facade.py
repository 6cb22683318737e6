"""`Service`: the leaderboard, submission, script, event and account parts over one pool, GPU
registry and clock, with the limits a deployment sets."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import asyncpg

from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.submission import MAX_SUBMISSION_BYTES
from cluster_manager.service.accounts import Accounts
from cluster_manager.service.announcements import Announcements
from cluster_manager.service.controls import Controls
from cluster_manager.service.event_hub import EventHub
from cluster_manager.service.events import LiveEvents
from cluster_manager.service.exports import Exports
from cluster_manager.service.follows import Follows
from cluster_manager.service.history import History
from cluster_manager.service.invites import Invites
from cluster_manager.service.leaderboards import Leaderboards
from cluster_manager.service.monitoring import Monitoring
from cluster_manager.service.quotas import QuotaPolicy
from cluster_manager.service.rates import (
    DEFAULT_RATE_LIMIT_PER_HOUR,
    DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR,
)
from cluster_manager.service.reruns import Reruns
from cluster_manager.service.scripts import ScriptRuns
from cluster_manager.service.sessions import WebSessions
from cluster_manager.service.submissions import Submissions
from cluster_manager.service.sync import ProblemSets
from cluster_manager.service.teams import Teams


class Service(
    ProblemSets,
    Reruns,
    Leaderboards,
    Submissions,
    History,
    ScriptRuns,
    LiveEvents,
    Accounts,
    WebSessions,
    Controls,
    Exports,
    Invites,
    Teams,
    Announcements,
    Follows,
    Monitoring,
):
    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: GpuRegistry,
        *,
        default_rate_limit_per_hour: int = DEFAULT_RATE_LIMIT_PER_HOUR,
        quotas: QuotaPolicy | None = None,
        script_rate_limit_per_hour: int = DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR,
        script_wait_s: float = 300.0,
        max_submission_bytes: int = MAX_SUBMISSION_BYTES,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        installation: str | None = None,
        allow_unsandboxed_ranking: bool = False,
        unserved_gpus: Mapping[str, str] | None = None,
    ) -> None:
        self.pool = pool
        self.registry = registry
        # GPU types this process has no launcher for, each with why (GpuRegistry.unserved_by).
        self.unserved_gpus = dict(unserved_gpus or {})
        # The hourly limit per leaderboard is the policy's unless the policy is given whole.
        self.quotas = quotas or QuotaPolicy(per_hour=default_rate_limit_per_hour)
        self.script_rate_limit = script_rate_limit_per_hour
        # How long a script run waits for a free slot of its GPU type before giving up.
        self.script_wait_s = script_wait_s
        # Carried in script runs' dispatch keys; read from the database when not given.
        self._installation = installation
        self.max_submission_bytes = max_submission_bytes
        self.clock = clock
        # As the scheduler's: re-ranking after a deletion follows the same rule.
        self.allow_unsandboxed_ranking = allow_unsandboxed_ranking
        self.event_hub = EventHub(pool)
