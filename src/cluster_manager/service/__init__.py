"""The application service: the only thing front ends (CLI, Discord, API, web) call.

It validates, enforces the rules (names, deadlines, GPUs, rate limits, who may read what),
stores, enqueues jobs and publishes their progress. SQL lives in `storage/`; running jobs is
the scheduler's business. `Service` holds one part per role, each a plain class over a shared
`Context`; a front end calls a part (`service.leaderboards.create(...)`).

    context.py       Context: the pool, GPU registry and clock every part shares
    errors.py        what the service refuses, by kind
    receipts.py      who acts (Submitter) and what comes back (receipts, reports)
    rules.py         deadlines, who may delete, what a launcher allows, secret runs' redaction
    rates.py         the hourly rate limits
    quotas.py        the quota policy and per-user quotas a submission is checked against
    problem_sets.py  a problem set's folder or archive: its competition file and tasks
    task_check.py    a task run through the runner before it becomes a leaderboard
    script_launch.py a script run's request, and its launch on a GPU type's launcher
    event_hub.py     the one listening connection a process's live watches share
    health.py        operational checks behind /verifydb, /verifyruns and `/health`

  The parts, each `Service`'s attribute of the name in brackets:
    leaderboards.py  [leaderboards] creating, reading, ranking and deleting leaderboards
    sync.py          [problem_sets] a problem set's leaderboards created or updated at once
    submissions.py   [submissions] taking a submission in and reading it back
    reruns.py        [reruns] ranked submissions run again after a task fix
    history.py       [history] a user's own submissions: listing, reading, deleting
    queues.py        [queues] the queues per GPU type, and a user's places in line
    events.py        [events] live job events
    scripts.py       [scripts] script runs (`/run`): their GPU slots and per-user limit
    accounts.py      [accounts] API tokens: issuing, revoking, authenticating
    sessions.py      [sessions] web sessions: signing in to the pages with a token
    controls.py      [controls] organisers' controls: pausing, bans, invalidation, quotas,
                     channel policies, runs after the deadline, stats
    invites.py       [invites] invite-only leaderboards: codes, joining
    teams.py         [teams] teams on a leaderboard: create, invite, join, leave
    exports.py       [exports] a leaderboard as a data set: rankings, or every submission
    announcements.py [announcements] new leaders, announced once
    follows.py       [follows] which submissions a front end still owes a report
    monitoring.py    [monitoring] what /metrics and /health read: queues, live schedulers,
                     ended jobs, the database's round trip

    facade.py        Service: the parts above, built over one Context
    port.py          ServicePort: the parts the CLI calls, which Service and the CLI's API
                     client both satisfy
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
