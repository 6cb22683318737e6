"""The project's exception tree. Adapters translate foreign errors into these at their edge."""

from __future__ import annotations


class ClusterManagerError(Exception):
    """Base of every error the project raises on purpose; its text is meant for users."""


class InvalidTaskError(ClusterManagerError):
    """A task folder or zip that cannot be used. Names the file, the key and the reason."""

    what = "task"

    def __init__(self, file: str, key: str | None, reason: str) -> None:
        self.file = file
        self.key = key
        self.reason = reason
        where = f"{file}: {key}" if key else file
        super().__init__(f"invalid {self.what}: {where}: {reason}")


class InvalidCompetitionError(InvalidTaskError):
    """A competition YAML (a problem set's list of problems) that cannot be used."""

    what = "competition file"


class InvalidSubmissionError(ClusterManagerError):
    """A submission file that cannot be run (size, encoding, extension, entry point)."""


class LauncherError(ClusterManagerError):
    """A launcher could not run a request or fetch its result."""
