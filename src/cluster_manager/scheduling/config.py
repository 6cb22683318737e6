"""How a scheduler paces itself: leases, heartbeats, retries and the limits it gives each run."""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster_manager.core.models import Limits
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import served as served_store


@dataclass(frozen=True)
class SchedulerConfig:
    lease_s: float = 30.0
    heartbeat_s: float = 10.0
    poll_s: float = 1.0
    max_attempts: int = 3
    # Tries at following one dispatched run through launcher errors before giving it up.
    follow_attempts: int = 3
    limits: Limits = field(default_factory=Limits)
    # Rank scores of runs that were not fully sandboxed (core.sandboxing); off by default.
    allow_unsandboxed_ranking: bool = False
    throttle_threshold: float = run_store.DEFAULT_THROTTLE_THRESHOLD  # storage.throttling
    # A queued job fails once it has waited this long on a GPU type that no scheduler has run
    # for as long: a scheduler restarting within it fails nothing.
    served_window_s: float = served_store.SERVED_WINDOW_S
    # How often a whole-queue scheduler looks for such jobs.
    unserved_check_s: float = 5.0
