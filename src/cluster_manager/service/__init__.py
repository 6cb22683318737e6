"""The application service: the only thing front ends (CLI, Discord) call.

It validates, enforces the rules (names, deadlines, GPUs, rate limits, who may read what),
stores, enqueues jobs and publishes their progress. SQL lives in `storage/`; running jobs is
the scheduler's business.

    errors.py        what the service refuses, by kind
    receipts.py      who acts (Submitter) and what comes back (receipts, reports)
    rules.py         deadlines, who may delete, what a launcher allows, secret runs' redaction
    rates.py         the hourly rate limits
    leaderboards.py  creating, reading, ranking and deleting leaderboards
    submissions.py   taking a submission in and reading it back
    scripts.py       script runs (`/run`): their GPU slots and per-user limit
    script_launch.py a script run's request, and its launch on a GPU type's launcher
    problem_sets.py  a problem set's folder or archive: its competition file and tasks
    task_check.py    a task run through the runner before it becomes a leaderboard
    events.py        live job events
    history.py       a user's own submissions: listing, reading, deleting
    accounts.py      API tokens: issuing, revoking, authenticating
    sessions.py      web sessions: signing in to the pages with a token
    controls.py      organisers' controls: pausing, bans, invalidation, quotas, channel
                     policies, runs after the deadline, stats
    exports.py       a leaderboard as a data set: rankings, or every submission
    invites.py       invite-only leaderboards: codes, joining
    teams.py         teams on a leaderboard: create, invite, join, leave
    sync.py          a problem set's leaderboards created or updated at once
    announcements.py new leaders, announced once
    reruns.py        ranked submissions run again after a task fix
    monitoring.py    what /metrics watches: the queue, live schedulers, ended jobs
    facade.py        Service: the halves above composed
    port.py          ServicePort: what the CLI calls, which Service and the CLI's API client
                     both satisfy
"""

from cluster_manager.service.errors import (
    AlreadyExistsError,
    AlreadyInTeamError,
    BannedError,
    DeadlinePassedError,
    GpuBusyError,
    GpuNotAllowedError,
    GpuNotServedError,
    InvalidChannelPolicyError,
    InvalidDeadlineError,
    InvalidInviteError,
    InvalidMintError,
    InvalidQuotaError,
    InvalidTeamSizeError,
    MissingReasonError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    StillRunningError,
    SubmissionsPausedError,
    TeamError,
    TeamFullError,
    UnauthorizedError,
    UnknownUserError,
)
from cluster_manager.service.facade import Service
from cluster_manager.service.rates import (
    DEFAULT_RATE_LIMIT_PER_HOUR,
    DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR,
)
from cluster_manager.service.receipts import (
    TERMINAL_EVENTS,
    TERMINAL_STATES,
    QueueStatus,
    QueueView,
    SubmissionReceipt,
    SubmissionReport,
    Submitter,
)
from cluster_manager.service.rules import LATEST_DEADLINE_YEAR, check_may_delete, parse_deadline
from cluster_manager.service.scripts import SCRIPT_LEASE_S, SCRIPT_SLOT_POLL_S
from cluster_manager.service.sessions import WebSession

__all__ = [
    "DEFAULT_RATE_LIMIT_PER_HOUR",
    "DEFAULT_SCRIPT_RATE_LIMIT_PER_HOUR",
    "LATEST_DEADLINE_YEAR",
    "SCRIPT_LEASE_S",
    "SCRIPT_SLOT_POLL_S",
    "TERMINAL_EVENTS",
    "TERMINAL_STATES",
    "AlreadyExistsError",
    "AlreadyInTeamError",
    "BannedError",
    "DeadlinePassedError",
    "GpuBusyError",
    "GpuNotAllowedError",
    "GpuNotServedError",
    "InvalidChannelPolicyError",
    "InvalidDeadlineError",
    "InvalidInviteError",
    "InvalidMintError",
    "InvalidQuotaError",
    "InvalidTeamSizeError",
    "MissingReasonError",
    "NotFoundError",
    "PermissionDeniedError",
    "QueueStatus",
    "QueueView",
    "RateLimitedError",
    "Service",
    "StillRunningError",
    "SubmissionReceipt",
    "SubmissionReport",
    "SubmissionsPausedError",
    "Submitter",
    "TeamError",
    "TeamFullError",
    "UnauthorizedError",
    "UnknownUserError",
    "WebSession",
    "check_may_delete",
    "parse_deadline",
]
