"""What users read when something fails.

Our own errors carry text meant for users: each kind gets a title and goes back ephemerally.
Anything else is a bug or an outage: it is logged with a short id, and the user gets the id
to quote. Internal details (and tokens) never reach the channel.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

import discord
from discord import app_commands

from cluster_manager.core.errors import (
    ClusterManagerError,
    InvalidSubmissionError,
    InvalidTaskError,
    LauncherError,
)
from cluster_manager.core.gpus import UnknownGpuError
from cluster_manager.core.profiling import InvalidProfileOptions
from cluster_manager.core.records import InvalidNameError
from cluster_manager.discord.replies import send_error
from cluster_manager.service import (
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
)
from cluster_manager.service.errors import DatabaseError

log = logging.getLogger(__name__)


class AttachmentError(ClusterManagerError):
    """An uploaded file refused before it is downloaded."""


class FileTooLargeError(AttachmentError):
    """An attachment over the size limit for what it is (a submission, a task archive)."""


class WrongFileTypeError(AttachmentError):
    """An attachment whose extension is not one the command takes for it."""


class UsageError(ClusterManagerError):
    """A command used in a way that cannot work, e.g. without a leaderboard to submit to."""


def _rate_limited(error: RateLimitedError) -> str:
    when = discord.utils.utcnow() + error.retry_after
    return f"{error} (that is {discord.utils.format_dt(when, 'R')})"


def _roles(error: app_commands.MissingAnyRole | app_commands.MissingRole) -> str:
    if isinstance(error, app_commands.MissingAnyRole):
        roles = list(error.missing_roles)
    else:
        roles = [error.missing_role]
    names = " or ".join(f"**{r}**" for r in roles)
    return f"this command needs the role {names}"


def _cooldown(error: app_commands.CommandOnCooldown) -> str:
    return f"try again in {error.retry_after:.0f} s"


# Title and detail per error type; the most specific type in an error's MRO wins.
# tests/test_error_tables.py holds every error class of ours to a row here, to UNEXPECTED or to
# a line of AS_THEIR_BASE.
USER_ERRORS: dict[type[BaseException], tuple[str, Callable[[Any], str]]] = {
    NotFoundError: ("Not found", str),
    DeadlinePassedError: ("Deadline passed", str),
    GpuNotAllowedError: ("GPU not allowed", str),
    GpuNotServedError: ("GPU not available", str),
    UnknownGpuError: ("Unknown GPU", str),
    FileTooLargeError: ("File too large", str),
    WrongFileTypeError: ("Wrong file type", str),
    AttachmentError: ("File refused", str),
    InvalidSubmissionError: ("Invalid submission", str),
    InvalidProfileOptions: ("Invalid profile options", str),
    InvalidTaskError: ("Invalid task", str),
    InvalidDeadlineError: ("Invalid deadline", str),
    InvalidNameError: ("Invalid name", str),
    InvalidQuotaError: ("Invalid quota", str),
    InvalidChannelPolicyError: ("Invalid channel policy", str),
    AlreadyExistsError: ("Already exists", str),
    AlreadyInTeamError: ("Already in a team", str),
    TeamFullError: ("Team full", str),
    TeamError: ("Team", str),
    InvalidTeamSizeError: ("Invalid team size", str),
    PermissionDeniedError: ("Not allowed", str),
    StillRunningError: ("Still running", str),
    RateLimitedError: ("Rate limited", _rate_limited),
    GpuBusyError: ("GPU busy", str),
    SubmissionsPausedError: ("Submissions paused", str),
    BannedError: ("Banned", str),
    InvalidInviteError: ("Invite refused", str),
    InvalidMintError: ("Invalid invite codes", str),
    MissingReasonError: ("Reason needed", str),
    LauncherError: ("Runner unavailable", str),
    UsageError: ("Cannot do that", str),
    app_commands.MissingAnyRole: ("Missing role", _roles),
    app_commands.MissingRole: ("Missing role", _roles),
    app_commands.NoPrivateMessage: ("Server only", lambda _: "use this command in a server"),
    app_commands.CommandOnCooldown: ("Slow down", _cooldown),
    app_commands.CommandNotFound: (
        "Unknown command",
        lambda _: "this command is out of date; an admin can run /resync",
    ),
    app_commands.TransformerError: ("Invalid option", lambda e: f"cannot use {e.value!r}"),
    ClusterManagerError: ("Cannot do that", str),
}
# Ours, but not the user's to fix, and their text may describe the deployment.
UNEXPECTED: tuple[type[BaseException], ...] = (DatabaseError,)
# Ours answered as their nearest base (a row above, or UNEXPECTED), by why they need no row of
# their own: by name, since some belong to parts this one may not import.
AS_THEIR_BASE: dict[str, tuple[str, ...]] = {
    "the database's: logged with an id for the organisers, as any DatabaseError": (
        "DatabaseUnreachableError",
        "DatabaseUnavailableError",
        "PgToolError",
        "BackupError",
    ),
    "a launcher's own failure (GitHub's answers, a run past its time), as any launcher's": (
        "RunTimedOutError",
        "GitHubRateLimitedError",
        "HttpError",
        "TransientError",
        "RateLimitError",
    ),
    "its text says what it is, under its base's title": (
        "InvalidCompetitionError",  # 'Invalid task': "invalid competition file: ..."
        "UnknownUserError",  # 'Not found': "there is no user ..."
        "UnknownTeamCodeError",  # 'Invite refused', as any code is
    ),
    "never raised by a command: a process's start (its GPU registry, its role)": (
        "InvalidRegistryError",
        "AlreadyRunningError",
    ),
    "never raised by a command: the bot knows its members without API tokens": (
        "UnauthorizedError",
    ),
    "the HTTP API's and the CLI's own, never raised in the bot": (
        "UploadTooLargeError",
        "BadRequestError",
        "ApiError",
        "NotOverTheApiError",
    ),
}


def unwrap(error: BaseException) -> BaseException:
    if isinstance(error, app_commands.CommandInvokeError):
        return error.original
    return error


def describe(error: BaseException) -> str | None:
    """The user's message for an expected error, None for an unexpected one."""
    if isinstance(error, UNEXPECTED):
        return None
    for cls in type(error).__mro__:
        if cls in USER_ERRORS:
            title, detail = USER_ERRORS[cls]
            return f"❌ **{title}**: {detail(error)}"
    return None


def new_error_id() -> str:
    return secrets.token_hex(4)


async def report_error(interaction: discord.Interaction, error: BaseException) -> None:
    error = unwrap(error)
    message = describe(error)
    if message is None:
        error_id = new_error_id()
        where = interaction.command.qualified_name if interaction.command else "a component"
        log.error("error %s in %s (user %s)", error_id, where, interaction.user.id, exc_info=error)
        message = (
            "⚠️ Something went wrong on our side. "
            f"Please give the organizers this error id: `{error_id}`."
        )
    try:
        await send_error(interaction, message)
    except discord.HTTPException as exc:  # the interaction expired or was answered already
        log.warning("could not report an error to user %s: %s", interaction.user.id, exc.status)
