"""`cluster-manager admin ...`: organisers' controls. On the database by default; through the
server when CLUSTER_MANAGER_API_URL is set, with CLUSTER_MANAGER_ADMIN_TOKEN (a user's token
is refused there, as everywhere). Each command's body is written once, against the port."""

from __future__ import annotations

import getpass
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from cluster_manager.cli.common import cli, with_port
from cluster_manager.core.records import ChannelPolicy
from cluster_manager.core.wording import utc_minute
from cluster_manager.rendering.ops import format_controls, format_stats, format_user_quotas
from cluster_manager.rendering.reports import counted
from cluster_manager.service import Submitter, UnknownUserError
from cluster_manager.service.port import ServicePort
from cluster_manager.settings import Settings

T = TypeVar("T")


@cli.group("admin")
def admin_group() -> None:
    """Organisers' controls: pause submissions, ban users, stats."""


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


def _run(settings: Settings, body: Callable[[ServicePort], Awaitable[T]]) -> T:
    """`body` on the database, or through the server with the admin token."""
    return with_port(settings, body, role="admin")


leaderboard_option = click.option(
    "--leaderboard", "-l", metavar="NAME", help="Only this leaderboard (default: all of them)."
)


@admin_group.command("pause")
@leaderboard_option
@click.option("--reason", required=True, help="Shown to everyone whose submission it refuses.")
@click.pass_obj
def pause_command(settings: Settings, leaderboard: str | None, reason: str) -> None:
    """Stop taking submissions (queued jobs still run)."""

    async def body(port: ServicePort) -> None:
        pause = await port.controls.pause(leaderboard, reason, _actor())
        click.echo(f"paused {pause.leaderboard or 'everywhere'}: {pause.reason}")

    _run(settings, body)


@admin_group.command("resume")
@leaderboard_option
@click.pass_obj
def resume_command(settings: Settings, leaderboard: str | None) -> None:
    """Take submissions again."""

    async def body(port: ServicePort) -> None:
        where = leaderboard or "everywhere"
        resumed = await port.controls.resume(leaderboard)
        click.echo(f"resumed {where}" if resumed else f"{where} was not paused")

    _run(settings, body)


@admin_group.command("ban")
@click.argument("user")
@click.option("--reason", required=True, help="Shown to the user when a submission is refused.")
@click.option(
    "--force", is_flag=True, help="Ban USER even if nobody by that name is known here yet."
)
@click.pass_obj
def ban_command(settings: Settings, user: str, reason: str, force: bool) -> None:
    """Refuse USER's submissions and hide their rankings (kept; `unban` shows them again).

    USER is the id the bot or the CLI knows them by (a Discord id, or `submit --user NAME`,
    by default the operating system's user who ran `submit`). A USER nobody knows here is
    refused, since a typo would ban nobody; --force bans the name before its first
    submission."""

    async def body(port: ServicePort) -> None:
        try:
            ban = await port.controls.ban(
                Submitter(user, user), reason, _actor(), known_only=not force
            )
        except UnknownUserError:
            raise _unknown_user(user) from None
        click.echo(f"banned {ban.user}: {ban.reason}")

    _run(settings, body)


def _unknown_user(user: str) -> UnknownUserError:
    return UnknownUserError(
        f"nobody named {user!r} has submitted here or is a known user; nothing banned "
        "(`--force` bans the name anyway)"
    )


@admin_group.command("unban")
@click.argument("user")
@click.pass_obj
def unban_command(settings: Settings, user: str) -> None:
    """Let USER submit again, and show their rankings."""

    async def body(port: ServicePort) -> None:
        lifted = await port.controls.unban(user)
        click.echo(f"unbanned {user}" if lifted else f"{user} was not banned")

    _run(settings, body)


@admin_group.command("invalidate")
@click.argument("submission_id", type=int)
@click.option("--reason", required=True, help="Kept with it; shown with the submission.")
@click.pass_obj
def invalidate_command(settings: Settings, submission_id: int, reason: str) -> None:
    """Take a submission out of every ranking (kept; `restore` undoes it)."""

    async def body(port: ServicePort) -> None:
        await port.controls.invalidate(submission_id, reason, _actor())
        click.echo(f"invalidated submission {submission_id}: {reason}; its user is ranked again")

    _run(settings, body)


@admin_group.command("restore")
@click.argument("submission_id", type=int)
@click.pass_obj
def restore_command(settings: Settings, submission_id: int) -> None:
    """Undo `invalidate`: the submission ranks again where it is its user's best."""

    async def body(port: ServicePort) -> None:
        await port.controls.restore(submission_id)
        click.echo(f"restored submission {submission_id}")

    _run(settings, body)


@admin_group.command("rerun")
@click.argument("leaderboard")
@click.option("--user", default=None, help="Only this user's ranked submission(s).")
@click.option("--submission", "submission_id", type=int, default=None, help="Only this one.")
@click.pass_obj
def rerun_command(
    settings: Settings, leaderboard: str, user: str | None, submission_id: int | None
) -> None:
    """Run LEADERBOARD's ranked submissions again after a task fix (behind everyone's own
    jobs); each keeps its score until its rerun is in."""

    async def body(port: ServicePort) -> None:
        jobs = await port.reruns.enqueue(leaderboard, user=user, submission_id=submission_id)
        queued = sorted({j.submission_id for j in jobs})
        ids = ", ".join(map(str, queued))
        which = f" (submission{'' if len(queued) == 1 else 's'} {ids})" if queued else ""
        click.echo(f"queued {counted(len(queued), 'submission')} of {leaderboard} again{which}")

    _run(settings, body)


@admin_group.command("close")
@click.argument("leaderboard")
@click.pass_obj
def close_command(settings: Settings, leaderboard: str) -> None:
    """Make LEADERBOARD invite-only: listed to and submittable by its members only."""

    async def body(port: ServicePort) -> None:
        await port.invites.set_closed(leaderboard, True)
        click.echo(
            f"{leaderboard} is invite-only; mint codes with `admin invites {leaderboard} --mint N`"
        )

    _run(settings, body)


@admin_group.command("channel-policy")
@click.argument("leaderboard")
@click.argument("policy", type=click.Choice([p.value for p in ChannelPolicy]))
@click.pass_obj
def channel_policy_command(settings: Settings, leaderboard: str, policy: str) -> None:
    """What LEADERBOARD's Discord channel sees of its submissions: ranked (a ranked
    submission's verdict and places, the default), none, or all (every submission's verdict
    line). Its output stays its submitter's under every policy."""

    async def body(port: ServicePort) -> None:
        board = await port.controls.set_channel_policy(leaderboard, policy, _actor())
        note = " (invite-only: its channel sees nothing while it is)" if board.closed else ""
        click.echo(f"{leaderboard}'s channel policy is {board.channel_policy.value}{note}")

    _run(settings, body)


@admin_group.command("after-deadline")
@click.argument("leaderboard")
@click.argument("state", type=click.Choice(["on", "off"]))
@click.pass_obj
def after_deadline_command(settings: Settings, leaderboard: str, state: str) -> None:
    """Whether LEADERBOARD takes runs after its deadline (on by default): tests, benchmarks
    and ranked runs, ranked on their own and never in the competition's ranking."""

    async def body(port: ServicePort) -> None:
        board = await port.controls.set_after_deadline_runs(leaderboard, state == "on", _actor())
        taken = "takes" if board.after_deadline_runs else "takes no"
        click.echo(f"{leaderboard} {taken} runs after its deadline")

    _run(settings, body)


@admin_group.command("teams")
@click.argument("leaderboard")
@click.option(
    "--size", type=click.IntRange(min=1), default=None, help="The most members a team may have."
)
@click.option(
    "--shared-quota/--own-quota",
    default=None,
    help="Whether the hourly quota counts a team's submissions together, or each member's own.",
)
@click.pass_obj
def teams_command(
    settings: Settings, leaderboard: str, size: int | None, shared_quota: bool | None
) -> None:
    """Set LEADERBOARD's team rules (what is not given stays) and print them."""

    async def body(port: ServicePort) -> None:
        board = await port.teams.set_rules(leaderboard, size=size, quotas=shared_quota)
        quota = "shared by each team" if board.team_quotas else "each member's own"
        click.echo(f"{board.name}: teams of up to {board.team_size}; the hourly quota is {quota}")

    _run(settings, body)


@admin_group.command("open")
@click.argument("leaderboard")
@click.pass_obj
def open_command(settings: Settings, leaderboard: str) -> None:
    """Open LEADERBOARD to everyone again."""

    async def body(port: ServicePort) -> None:
        await port.invites.set_closed(leaderboard, False)
        click.echo(f"{leaderboard} is open to everyone")

    _run(settings, body)


@admin_group.command("invites")
@click.argument("leaderboard")
@click.option("--mint", "count", type=int, default=None, help="Mint this many new codes.")
@click.option("--uses", type=int, default=1, show_default=True, help="Users each new code admits.")
@click.pass_obj
def invites_command(settings: Settings, leaderboard: str, count: int | None, uses: int) -> None:
    """List LEADERBOARD's invite codes, or mint new ones (printed one per line)."""

    async def body(port: ServicePort) -> None:
        if count is not None:
            click.echo("\n".join(await port.invites.mint(leaderboard, count, uses, _actor())))
            return
        found = await port.invites.all(leaderboard)
        for invite in found:
            state = "revoked" if invite.revoked else f"{invite.uses}/{invite.max_uses} used"
            made = f"{invite.created_by}, {utc_minute(invite.created_at)}"
            click.echo(f"{invite.code}  {state}  ({made})")
        if not found:
            click.echo(f"{leaderboard} has no invite codes")

    _run(settings, body)


@admin_group.command("revoke-invite")
@click.argument("code")
@click.pass_obj
def revoke_invite_command(settings: Settings, code: str) -> None:
    """Stop CODE from admitting anyone else (who joined with it stays)."""

    async def body(port: ServicePort) -> None:
        revoked = await port.invites.revoke(code)
        click.echo(f"revoked {code}" if revoked else f"{code} is unknown or already revoked")

    _run(settings, body)


@admin_group.command("quota")
@click.argument("user")
@click.option("--per-hour", type=int, default=None, help="Submissions per hour per leaderboard.")
@click.option("--daily", type=int, default=None, help="Submissions per day, all leaderboards.")
@click.option("--clear", is_flag=True, help="Back to the deployment's quotas.")
@click.pass_obj
def quota_command(
    settings: Settings, user: str, per_hour: int | None, daily: int | None, clear: bool
) -> None:
    """Give USER quotas of their own (GPU types' caps still hold), or --clear them. Without
    options: the quotas that hold for USER now, and whether they are USER's own."""

    async def body(port: ServicePort) -> None:
        if clear:
            cleared = await port.controls.clear_quota(user)
            click.echo(f"{user} has the deployment's quotas" if cleared else f"{user} had none")
        elif per_hour is None and daily is None:
            click.echo(format_user_quotas((await port.controls.quota_of(user)).to_json()))
        else:
            await port.controls.set_quota(
                Submitter(user, user), per_hour=per_hour, daily=daily, actor=_actor()
            )
            click.echo(
                f"quotas of {user}: per hour {per_hour or 'default'}, daily {daily or 'default'}"
            )

    _run(settings, body)


@admin_group.command("status")
@click.pass_obj
def status_command(settings: Settings) -> None:
    """What is paused, who is banned and who has quotas of their own."""

    async def body(port: ServicePort) -> None:
        pauses = [p.to_json() for p in await port.controls.pauses()]
        bans = [b.to_json() for b in await port.controls.bans()]
        quotas = [q.to_json() for q in await port.controls.custom_quotas()]
        policies = [p.to_json() for p in await port.controls.channel_policies()]
        refusals = [r.to_json() for r in await port.controls.after_deadline_refusals()]
        click.echo(format_controls(pauses, bans, quotas, policies, refusals))

    _run(settings, body)


@admin_group.command("stats")
@click.option("--last-day", is_flag=True, help="Only the last 24 hours.")
@click.option("--json", "as_json", is_flag=True, help="The numbers as JSON.")
@click.pass_obj
def stats_command(settings: Settings, last_day: bool, as_json: bool) -> None:
    """Submissions, users, runs and queue waits per GPU, failures by verdict."""

    async def body(port: ServicePort) -> None:
        found = (await port.controls.stats(last_day=last_day)).to_json()
        click.echo(json.dumps(found, indent=2) if as_json else format_stats(found))

    _run(settings, body)
