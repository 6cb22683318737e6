"""Every error of ours has its answer in each front end, chosen on purpose: a row of its own in
the front end's table, or a line of the front end's list of errors that take their base's
answer, with why. A new error class fails here until each front end says what it answers, and
until it says what it means in a docstring."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from datetime import timedelta

import pytest
from starlette.requests import Request

import cluster_manager
from cluster_manager.api import error_handlers as api
from cluster_manager.cli import errors as cli
from cluster_manager.cli.api_client import ApiError
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.discord import error_handlers as discord
from cluster_manager.service import (
    InvalidInviteError,
    InvalidMintError,
    InvalidTeamSizeError,
    RateLimitedError,
    TeamError,
    UnknownUserError,
)
from cluster_manager.service.errors import DatabaseUnavailableError, UnknownTeamCodeError
from cluster_manager.settings import Settings


def _modules() -> Iterator[str]:
    """Every module of the package but the entry points (importing one runs the CLI) and the
    example tasks (data, importing each other by name in a run directory)."""
    for found in pkgutil.walk_packages(cluster_manager.__path__, "cluster_manager."):
        if not found.name.endswith("__main__") and ".data." not in found.name:
            yield found.name


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def error_classes() -> list[type[ClusterManagerError]]:
    for module in _modules():
        importlib.import_module(module)
    found = {ClusterManagerError, *_subclasses(ClusterManagerError)}
    ours = [c for c in found if c.__module__.startswith("cluster_manager.")]
    return sorted(ours, key=lambda c: c.__name__)


ERRORS = error_classes()
NAMES = {cls.__name__ for cls in ERRORS}


def _defaults(table: dict[str, tuple[str, ...]]) -> list[str]:
    assert all(reason.strip() for reason in table), "a list without its reason"
    return [name for names in table.values() for name in names]


def _ours(rows: object) -> list[str]:
    return [
        cls.__name__
        for cls in rows  # type: ignore[attr-defined]
        if isinstance(cls, type) and issubclass(cls, ClusterManagerError)
    ]


# Per front end: the classes with a row of their own, and those named on its lists of errors
# that take their base's answer.
FRONT_ENDS = {
    "api": (_ours(api.STATUS_OF), _defaults(api.AS_THEIR_BASE)),
    "discord": (
        _ours(discord.USER_ERRORS) + _ours(discord.UNEXPECTED),
        _defaults(discord.AS_THEIR_BASE),
    ),
    "cli": (_ours(cli.lines()), _defaults(cli.OWN_TEXT)),
}


def test_the_walk_finds_errors_of_every_layer():
    assert len(NAMES) == len(ERRORS), "two error classes share a name"
    modules = {cls.__module__.split(".")[1] for cls in ERRORS}
    assert {"core", "storage", "service", "launchers", "api", "discord", "cli"} <= modules
    assert {"TeamError", "InvalidInviteError", "HttpError", "UsageError"} <= NAMES


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_every_error_has_an_answer_chosen_in_each_front_end(front_end: str):
    rows, defaults = FRONT_ENDS[front_end]
    listed = rows + defaults
    assert sorted(NAMES - set(listed)) == [], f"errors {front_end} answers by accident"
    assert sorted(set(listed) - NAMES) == [], f"{front_end} lists errors that do not exist"
    twice = sorted({name for name in listed if listed.count(name) > 1})
    assert twice == [], f"{front_end} lists these twice, or both as a row and as a default"


def test_every_error_says_what_it_means():
    bare = [cls.__name__ for cls in ERRORS if not (cls.__dict__.get("__doc__") or "").strip()]
    assert bare == []


# --- the answers themselves ------------------------------------------------------------------


def _request() -> Request:
    return Request({"type": "http", "method": "POST", "path": "/teams/join", "headers": []})


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (TeamError("you are in no team on 'board': create one or join one first"), 409),
        (InvalidTeamSizeError("a team has 1 to 100 members, not 0"), 400),
        (InvalidInviteError("this invite code has been used as often as it may be"), 404),
        (UnknownTeamCodeError("this team code is unknown or was used"), 404),
        (InvalidMintError("mint 1 to 100 codes at a time, not 0"), 400),
        (UnknownUserError("there is no user 'nobody'"), 404),
        (RateLimitedError("rate limit", timedelta(minutes=1)), 429),
    ],
)
def test_the_api_answers_with_the_status_of_the_errors_kind(error: ClusterManagerError, status):
    assert api.answer_of(_request(), error) == (status, str(error))


def test_the_api_hides_the_databases_words_behind_a_logged_id(caplog):
    error = DatabaseUnavailableError("the database is unavailable: db.internal:5432 closed")
    status, said = api.answer_of(_request(), error)
    assert status == 503 and "db.internal" not in said
    error_id = said.split("(id ")[1].split(")")[0]
    assert any(error_id in r.getMessage() and r.exc_info for r in caplog.records)


def test_each_front_end_answers_a_team_error_and_an_invalid_invite():
    assert discord.describe(TeamError("in no team")) == "❌ **Team**: in no team"
    assert discord.describe(InvalidInviteError("used up")) == "❌ **Invite refused**: used up"
    settings = Settings()
    assert cli.error_line(settings, TeamError("in no team")) == "in no team"
    refused = cli.error_line(settings, ApiError(401, "unknown or revoked API token"))
    assert refused.startswith("unknown or revoked API token; ")
    assert "CLUSTER_MANAGER_TOKEN" in refused and "CLUSTER_MANAGER_ADMIN_TOKEN" in refused
    assert cli.error_line(settings, ApiError(404, "gone")) == "gone"
