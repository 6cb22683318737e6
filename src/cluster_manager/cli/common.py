"""What every command shares: the group, settings, exit codes and the app's lifetime."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar

import click

from cluster_manager.cli.errors import error_line
from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.core.models import Mode
from cluster_manager.settings import Settings, load_settings

if TYPE_CHECKING:
    from cluster_manager.app import App
    from cluster_manager.service import SubmissionReceipt
    from cluster_manager.service.port import ServicePort

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
    "team": ("team",),
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
            import_command(cmd_name)
        return super().get_command(ctx, cmd_name)


def import_command(name: str) -> None:
    """Imports the modules of the command `name` (which registers it); nothing for a name
    that is not a command's."""
    for module in COMMAND_MODULES.get(name, ()):
        importlib.import_module(f"cluster_manager.cli.{module}")


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
    Our own errors become a one-line message and exit code 2. For what runs on the database
    here whatever CLUSTER_MANAGER_API_URL says (the server's own processes); every other
    command runs through `with_port`."""

    import asyncio  # here: `eval`, which needs no event loop, starts a tenth of a second sooner

    from cluster_manager.app import open_app

    async def run() -> T:
        async with open_app(settings) as app:
            return await body(app)

    try:
        return asyncio.run(run())
    except ClusterManagerError as exc:
        fail(error_line(settings, exc))


def refuse_over_api(settings: Settings, what: str) -> None:
    """For a command that acts only on a database it opens itself (`what` it does there):
    with CLUSTER_MANAGER_API_URL set and DATABASE_URL not, it would make an empty embedded
    database in this folder instead of reaching the server's, so it is refused (one line,
    exit code 2)."""
    if settings.api_url is not None and not settings.database_url:
        fail(
            f"{what} that it opens itself, never the server's through its API: "
            "CLUSTER_MANAGER_API_URL is set and DATABASE_URL is not. Set DATABASE_URL to the "
            "database to act on, or unset CLUSTER_MANAGER_API_URL to use the embedded one in "
            f"{settings.data_dir / 'postgres'}"
        )


# Whose token a command sends to a server: a user's, or the organisers' admin token.
Role = Literal["user", "admin"]
# Runs a submission's jobs to their end: on a database the command serves them itself;
# through a server, the server's workers do and there is nothing to run here.
RunJobs = Callable[["SubmissionReceipt"], Awaitable[None]]


def with_port(
    settings: Settings, body: Callable[[ServicePort], Awaitable[T]], *, role: Role = "user"
) -> T:
    """Runs `body` against the service: through the server when CLUSTER_MANAGER_API_URL is
    set (with the admin token for `role` "admin", else the user's), else on the database.
    Our own errors become a one-line message and exit code 2."""

    async def without_jobs(port: ServicePort, _run_jobs: RunJobs) -> T:
        return await body(port)

    return with_port_and_jobs(settings, without_jobs, role=role)


def with_port_and_jobs(
    settings: Settings,
    body: Callable[[ServicePort, RunJobs], Awaitable[T]],
    *,
    role: Role = "user",
) -> T:
    """`with_port` for a body that also has its submissions' jobs run (`submit`)."""
    import asyncio

    made_here: list[Path] = []  # the embedded database, when this command created it

    async def run() -> T:
        if settings.api_url is not None:
            return await _over_api(settings, body, role)
        from cluster_manager.app import open_app

        async with open_app(settings) as app:
            if app.new_database:
                made_here.append(settings.data_dir / "postgres")
            port: ServicePort = app.service  # where mypy holds Service to the port
            return await body(port, _served_here(app))

    try:
        found = asyncio.run(run())
    except ClusterManagerError as exc:
        note = "".join(f"; {new_database_note(d, empty=True)}" for d in made_here)
        fail(error_line(settings, exc) + note)
    for folder in made_here:
        click.echo(f"note: {new_database_note(folder, empty=False)}", err=True)
    return found


def new_database_note(folder: Path, *, empty: bool) -> str:
    """What a command that created the embedded database says: a read of a leaderboard that
    the user expected on a server would otherwise only say that there is none."""
    return (
        f"this command created a new{', empty' if empty else ''} local database in {folder} "
        "(DATABASE_URL is unset): set CLUSTER_MANAGER_API_URL to use a server, or "
        "DATABASE_URL for another database"
    )


def _served_here(app: App) -> RunJobs:
    async def run_jobs(receipt: SubmissionReceipt) -> None:
        # Its own jobs, and orphans of their GPU types (a killed submit's, once their lease ends).
        scheduler = app.scheduler(
            submission_ids={receipt.submission_id}, gpus={j.gpu for j in receipt.jobs}
        )
        await scheduler.run_until_idle({j.id for j in receipt.jobs})

    return run_jobs


async def _over_api(
    settings: Settings, body: Callable[[ServicePort, RunJobs], Awaitable[T]], role: Role
) -> T:
    # Here: commands on a database need no httpx.
    from cluster_manager.cli.api_client import ApiClient
    from cluster_manager.cli.remote_service import RemoteService

    assert settings.api_url is not None
    # The admin role falls back to the user's token, which the server refuses with its reason.
    token = (settings.admin_token or settings.api_token) if role == "admin" else settings.api_token

    async def run_nothing(_receipt: SubmissionReceipt) -> None:
        """The server's workers run the jobs."""

    async with ApiClient(settings.api_url, token) as client:
        port: ServicePort = RemoteService(client)  # and the API's client
        try:
            return await body(port, run_nothing)
        except (KeyError, TypeError) as exc:  # reading an answer of a shape we do not know
            raise ClusterManagerError(
                f"the API at {settings.api_url} answered in a form this CLI does not read "
                f"({type(exc).__name__}: {exc}): is the server another version?"
            ) from exc
