"""`Service`: one part per role (leaderboards, submissions, scripts, events, accounts, ...),
each a plain class over one shared `Context` (pool, GPU registry, clock), with the limits a
deployment sets handed to the parts they bind. A front end calls a part:
`service.leaderboards.create(...)`, `service.submissions.submit(...)`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import asyncpg

from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.submission import MAX_SUBMISSION_BYTES
from cluster_manager.service.accounts import Accounts
from cluster_manager.service.announcements import Announcements
from cluster_manager.service.context import Context
from cluster_manager.service.controls import Controls
from cluster_manager.service.events import LiveEvents
from cluster_manager.service.exports import Exports
from cluster_manager.service.follows import Follows
from cluster_manager.service.history import History
from cluster_manager.service.invites import Invites
from cluster_manager.service.leaderboards import Leaderboards
from cluster_manager.service.monitoring import Monitoring
from cluster_manager.service.queues import Queues
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

# The attributes of `Service` that are its parts, in the order they are built.
PARTS = (
    "leaderboards",
    "problem_sets",
    "submissions",
    "reruns",
    "history",
    "queues",
    "events",
    "scripts",
    "accounts",
    "sessions",
    "controls",
    "invites",
    "teams",
    "exports",
    "announcements",
    "follows",
    "monitoring",
)


class Service:
    """The parts, and what they share: `pool` (for the composition root and the tests),
    `registry` and `clock` (what a front end reads beside the parts: GPU types, the time a
    page is drawn at)."""

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
        ctx = Context(pool, registry, clock, allow_unsandboxed_ranking)
        self.pool = pool
        self.registry = registry
        self.clock = clock
        # The hourly limit per leaderboard is the policy's unless the policy is given whole.
        quotas = quotas or QuotaPolicy(per_hour=default_rate_limit_per_hour)
        self.leaderboards = Leaderboards(ctx, unserved_gpus)
        self.problem_sets = ProblemSets(ctx, self.leaderboards)
        self.submissions = Submissions(ctx, quotas, max_submission_bytes)
        self.reruns = Reruns(ctx)
        self.history = History(ctx)
        self.queues = Queues(ctx)
        self.events = LiveEvents(ctx)
        self.scripts = ScriptRuns(
            ctx,
            rate_limit_per_hour=script_rate_limit_per_hour,
            wait_s=script_wait_s,
            installation=installation,
        )
        self.accounts = Accounts(ctx)
        self.sessions = WebSessions(ctx)
        self.controls = Controls(ctx, quotas)
        self.invites = Invites(ctx)
        self.teams = Teams(ctx)
        self.exports = Exports(ctx)
        self.announcements = Announcements(ctx)
        self.follows = Follows(ctx)
        self.monitoring = Monitoring(ctx)
