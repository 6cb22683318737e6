"""What every command shares: the group, settings, exit codes and the app's lifetime."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode
from cluster_manager.settings import Settings, load_settings

if TYPE_CHECKING:
    from cluster_manager.app import App
    from cluster_manager.cli.api_client import ApiClient

EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
# Command -> the module of `cluster_manager.cli` that defines it.
# Each command's modules: the first defines the command; the others add subcommands to it.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "admin": ("admin",),
    "bot": ("bot",),
    "db": ("db",),
    "demo": ("demo",),
    "eval": ("local_eval",),
    "join": ("join",),
    "leaderboard": ("leaderboard", "export", "sync"),
    "queue": ("queue",),
    "serve": ("serve",),
    "submit": ("submit",),
    "user": ("user",),
    "worker": ("worker",),
}


root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A task folder's sources may come from anywhere under this folder (default: the "
    "nearest folder above the task holding .git or a competition YAML, else its grandparent).",
)


# Who `--user` is when it is not given, on a database (through a server: the token's user).
DEFAULT_USER_HELP = (
    "default: the operating system's user running the command, the name `whoami` prints"
)
# Other names of a mode: the Discord bot calls leaderboard mode "ranked".
MODE_ALIASES = {"ranked": Mode.LEADERBOARD.value}


def mode_option(default: Mode, help: str) -> Callable[[F], F]:
    """`--mode`: one of the modes, or an alias, given to the command as the mode's own name."""
    return click.option(
        "--mode",
        type=click.Choice([*(m.value for m in Mode), *MODE_ALIASES]),
        default=default.value,
        show_default=True,
        callback=lambda _ctx, _param, value: MODE_ALIASES.get(value, value),
        help=f"{help} `ranked` is another name for leaderboard (the Discord bot's word).",
    )


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


class LazyGroup(click.Group):
    """Imports a command's module only when it runs: `eval` never loads the database, the
    scheduler or Discord, which would cost a start-up longer than a short run itself."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            for module in COMMAND_MODULES.get(cmd_name, ()):
                importlib.import_module(f"cluster_manager.cli.{module}")  # registers it
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """GPU-kernel competitions: check, time and rank kernels."""
    try:
        ctx.obj = load_settings()
    except ClusterManagerError as exc:
        fail(str(exc))


def with_app(settings: Settings, body: Callable[[App], Awaitable[T]]) -> T:
    """Opens the database (embedded when DATABASE_URL is unset), runs `body`, closes it.
    Our own errors become a one-line message and exit code 2."""

    import asyncio  # here: `eval`, which needs no event loop, starts a tenth of a second sooner

    from cluster_manager.app import open_app

    async def run() -> T:
        async with open_app(settings) as app:
            return await body(app)

    try:
        return asyncio.run(run())
    except ClusterManagerError as exc:
        fail(database_error_text(settings, exc))


def database_error_text(settings: Settings, exc: ClusterManagerError) -> str:
    """The error's one line; for a database that cannot be reached at all: which one was
    tried (without its password), why not, and how to point at another."""
    from cluster_manager.service.errors import DatabaseUnreachableError

    if not isinstance(exc, DatabaseUnreachableError):
        return str(exc)
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


def without_password(text: str) -> str:
    """A database URL or DSN, or a message quoting one, with its passwords masked."""
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"(password=)[^&\s]*", r"\1***", text)


def on_database_or_server(
    settings: Settings,
    local: Callable[[App], Awaitable[T]],
    over_api: Callable[[ApiClient], T],
    *,
    token: str | None,
) -> T:
    """`local` on the database, or `over_api` with `token` against the server the settings
    point at (CLUSTER_MANAGER_API_URL). A refusal is a one-line error, exit code 2."""
    if settings.api_url is None:
        return with_app(settings, local)
    from cluster_manager.cli.api_client import (
        ApiClient,  # here: commands on a database need no httpx
    )

    try:
        with ApiClient(settings.api_url, token) as client:
            return over_api(client)
    except ClusterManagerError as exc:
        fail(str(exc))
