"""What the service refuses, by kind: front ends map each kind to their own answer.

The database's own failures are named here too, so that front ends catch them without
reaching into storage.
"""

from __future__ import annotations

from datetime import timedelta

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.storage.database import DatabaseError as DatabaseError
from cluster_manager.storage.database import DatabaseUnavailableError as DatabaseUnavailableError
from cluster_manager.storage.database import DatabaseUnreachableError as DatabaseUnreachableError


class NotFoundError(ClusterManagerError):
    """What was asked for does not exist, or is hidden from the one who asked (the same answer)."""


class UnknownUserError(NotFoundError):
    """Nobody by that id has submitted, joined, held a token or been given quotas here."""


class AlreadyExistsError(ClusterManagerError):
    """What would be created is there already (a leaderboard, a team of that name)."""


class DeadlinePassedError(ClusterManagerError):
    """The leaderboard's deadline passed and it takes nothing more of the kind asked."""


class GpuNotAllowedError(ClusterManagerError):
    """A GPU type the leaderboard does not run on; the text lists those it does."""


class GpuNotServedError(GpuNotAllowedError):
    """A GPU type that nothing in this deployment runs (its launcher is not configured)."""


class PermissionDeniedError(ClusterManagerError):
    """Who asked may not do this (another user's submission, an organiser's action)."""


class StillRunningError(ClusterManagerError):
    """What is asked for must wait until the submission's jobs are done."""


class UnauthorizedError(ClusterManagerError):
    """No credentials, or ones that name nobody (an unknown or revoked token)."""


class InvalidDeadlineError(ClusterManagerError):
    """A deadline that cannot be read, or lies in the past or too far ahead."""


class RateLimitedError(ClusterManagerError):
    """Over a quota of submissions or script runs; `retry_after` says when one is free."""

    def __init__(self, message: str, retry_after: timedelta) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GpuBusyError(ClusterManagerError):
    """Every slot of a GPU type stayed taken for as long as a script run may wait."""


class SubmissionsPausedError(ClusterManagerError):
    """Organisers paused submissions (everywhere or on one leaderboard); the reason says why."""


class BannedError(ClusterManagerError):
    """The user may not submit: an organiser banned them."""


class MissingReasonError(ClusterManagerError):
    """An organiser's action that users see (a pause, a ban) came without a reason."""


class InvalidInviteError(ClusterManagerError):
    """An invite code that is unknown, revoked or used up."""


class InvalidMintError(ClusterManagerError):
    """A request for invite codes out of range: how many at once, or how many uses each."""


class UnknownTeamCodeError(InvalidInviteError, NotFoundError):
    """A team code that is unknown, used, gone with its minter, or of a board the user may
    not see: not found, the same answer for each."""


class InvalidQuotaError(ClusterManagerError):
    """A quota override that is not a positive number (or sets nothing)."""


class InvalidChannelPolicyError(ClusterManagerError):
    """A channel policy that is none of `ChannelPolicy`'s."""


class TeamError(ClusterManagerError):
    """A team action that the user's standing does not allow (in no team, holding every code
    a member may)."""


class InvalidTeamSizeError(TeamError):
    """A largest team size out of the range a leaderboard may set."""


class AlreadyInTeamError(AlreadyExistsError):
    """The user is in a team on that leaderboard already: one team per user per leaderboard."""


class TeamFullError(AlreadyExistsError):
    """The team has as many members as its leaderboard allows."""
