"""What a command says when one of our errors stops it: one line on stderr (`error: ...`) and
exit code 2. Our errors' text is written for users, so for most the line is that text; the
rows of `LINES` say more where the text cannot (which database was tried, which setting holds
the token). tests/test_error_tables.py holds every error class to a row of `lines()` or a line
of `OWN_TEXT`."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.settings import Settings

if TYPE_CHECKING:
    from cluster_manager.cli.api_client import ApiError
    from cluster_manager.service.errors import DatabaseUnreachableError


def without_password(text: str) -> str:
    """A database URL or DSN, or a message quoting one, with its passwords masked."""
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"(password=)[^&\s]*", r"\1***", text)


def _unreachable(settings: Settings, exc: DatabaseUnreachableError) -> str:
    """Which database was tried (without its password), why not, and how to point at another."""
    embedded = settings.data_dir / "postgres"
    if settings.database_url:
        return (
            f"cannot reach the database at {without_password(settings.database_url)} "
            f"(DATABASE_URL): {without_password(exc.reason)}. Start that server, or set "
            "DATABASE_URL (in the environment or .env) to a Postgres that runs; unset, "
            f"an embedded one in {embedded} is used"
        )
    return (
        f"cannot reach the embedded database in {embedded} (DATABASE_URL is unset): "
        f"{exc.reason}. Set DATABASE_URL (in the environment or .env) to a Postgres that "
        "runs, or CLUSTER_MANAGER_DATA_DIR to another place for the embedded one"
    )


def _refused_by_server(_settings: Settings, exc: ApiError) -> str:
    """The server's reason; for a token it refused, where this CLI takes its token from (the
    server's words speak of headers, which the CLI's user never writes)."""
    if exc.status != 401:
        return str(exc)
    return (
        f"{exc}; this CLI sends the token in CLUSTER_MANAGER_TOKEN (organisers' commands: "
        "CLUSTER_MANAGER_ADMIN_TOKEN), in the environment or .env"
    )


@functools.cache
def lines() -> dict[type[ClusterManagerError], Callable[[Settings, Any], str]]:
    """The line of each error that says more than its own text; the most specific class in an
    error's MRO decides. Made when first asked for: the classes' modules load httpx and
    asyncpg, which `eval` never needs."""
    from cluster_manager.cli.api_client import ApiError
    from cluster_manager.service.errors import DatabaseUnreachableError

    return {DatabaseUnreachableError: _unreachable, ApiError: _refused_by_server}


# Our errors whose own text is the whole line, by why it needs nothing more: by name, since some
# belong to parts the CLI may not import.
OWN_TEXT: dict[str, tuple[str, ...]] = {
    "the default: our errors' text is written for the user who reads it": ("ClusterManagerError",),
    "the service's refusal names what was refused and why (and when to try again)": (
        "NotFoundError",
        "UnknownUserError",
        "UnknownTeamCodeError",
        "AlreadyExistsError",
        "AlreadyInTeamError",
        "TeamFullError",
        "TeamError",
        "InvalidTeamSizeError",
        "DeadlinePassedError",
        "GpuNotAllowedError",
        "GpuNotServedError",
        "PermissionDeniedError",
        "StillRunningError",
        "UnauthorizedError",
        "InvalidDeadlineError",
        "RateLimitedError",
        "GpuBusyError",
        "SubmissionsPausedError",
        "BannedError",
        "MissingReasonError",
        "InvalidInviteError",
        "InvalidMintError",
        "InvalidQuotaError",
        "InvalidChannelPolicyError",
    ),
    "a file or value given to the command, named with what is wrong in it": (
        "InvalidTaskError",
        "InvalidCompetitionError",
        "InvalidSubmissionError",
        "InvalidProfileOptions",
        "InvalidRegistryError",
        "InvalidNameError",
        "UnknownGpuError",
    ),
    "a run on this machine's launchers (`eval`, a worker) failed: the text says where": (
        "LauncherError",
        "RunTimedOutError",
        "GitHubRateLimitedError",
        "HttpError",
        "TransientError",
        "RateLimitError",
    ),
    "the database's, read by the operator who runs the command; `db` masks passwords in it": (
        "DatabaseError",
        "DatabaseUnavailableError",
        "PgToolError",
        "BackupError",
    ),
    "names the process that holds the role (a second worker or bot)": ("AlreadyRunningError",),
    "says that the command works only on a database, and how to run it there": (
        "NotOverTheApiError",
    ),
    "another front end's own (the HTTP API's, the Discord bot's), never raised in a command": (
        "UploadTooLargeError",
        "BadRequestError",
        "AttachmentError",
        "FileTooLargeError",
        "WrongFileTypeError",
        "UsageError",
    ),
}


def error_line(settings: Settings, exc: ClusterManagerError) -> str:
    """The line that a command stopped by `exc` writes after `error: `."""
    for kind in type(exc).__mro__:
        if kind in lines():
            return lines()[kind](settings, exc)
    return str(exc)
