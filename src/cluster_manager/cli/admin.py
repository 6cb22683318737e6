"""`cluster-manager admin ...`: organisers' controls. On the database by default; through the
server when CLUSTER_MANAGER_API_URL is set, with CLUSTER_MANAGER_ADMIN_TOKEN (a user's token
is refused there, as everywhere)."""

from __future__ import annotations

import getpass
import json
from collections.abc import Awaitable, Callable
from typing import Any

import click

from cluster_manager.app import App
from cluster_manager.cli.api_client import ApiClient, ApiError
from cluster_manager.cli.common import cli, on_database_or_server
from cluster_manager.rendering.ops import format_controls, format_stats, format_user_quotas
from cluster_manager.service import Submitter, UnknownUserError
from cluster_manager.settings import Settings

LocalCall = Callable[[App], Awaitable[Any]]
RemoteCall = Callable[[ApiClient], Any]
# `admin status`'s pauses, bans and custom quotas, each in the admin API's JSON form.
ControlsJson = tuple[list[Any], list[Any], list[Any]]


@cli.group("admin")
def admin_group() -> None:
    """Organisers' controls: pause submissions, ban users, stats."""


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


def _run(settings: Settings, local: LocalCall, over_api: RemoteCall) -> Any:
    """`local` on the database, or `over_api` with the admin token (a user's token is
    refused there, as everywhere)."""
    token = settings.admin_token or settings.api_token
    return on_database_or_server(settings, local, over_api, token=token)


leaderboard_option = click.option(
    "--leaderboard", "-l", metavar="NAME", help="Only this leaderboard (default: all of them)."
)


@admin_group.command("pause")
@leaderboard_option
@click.option("--reason", required=True, help="Shown to everyone whose submission it refuses.")
@click.pass_obj
def pause_command(settings: Settings, leaderboard: str | None, reason: str) -> None:
    """Stop taking submissions (queued jobs still run)."""

    async def local(app: App) -> Any:
        return (await app.service.pause_submissions(leaderboard, reason, _actor())).to_json()

    def over_api(client: ApiClient) -> Any:
        return client.call("POST", "/admin/stop", {"leaderboard": leaderboard, "reason": reason})

    found = _run(settings, local, over_api)
    click.echo(f"paused {found['leaderboard'] or 'everywhere'}: {found['reason']}")


@admin_group.command("resume")
@leaderboard_option
@click.pass_obj
def resume_command(settings: Settings, leaderboard: str | None) -> None:
    """Take submissions again."""

    async def local(app: App) -> bool:
        return await app.service.resume_submissions(leaderboard)

    def over_api(client: ApiClient) -> bool:
        return bool(client.call("POST", "/admin/start", {"leaderboard": leaderboard})["was_paused"])

    where = leaderboard or "everywhere"
    resumed = _run(settings, local, over_api)
    click.echo(f"resumed {where}" if resumed else f"{where} was not paused")


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

    async def local(app: App) -> Any:
        try:
            ban = await app.service.ban_user(
                Submitter(user, user), reason, _actor(), known_only=not force
            )
        except UnknownUserError:
            raise _unknown_user(user) from None
        return ban.to_json()

    def over_api(client: ApiClient) -> Any:
        try:
            return client.call("PUT", f"/admin/bans/{user}", {"reason": reason, "force": force})
        except ApiError as exc:
            if exc.status == 404:
                raise _unknown_user(user) from None
            raise

    found = _run(settings, local, over_api)
    click.echo(f"banned {found['user']}: {found['reason']}")


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

    async def local(app: App) -> bool:
        return await app.service.unban_user(user)

    def over_api(client: ApiClient) -> bool:
        return bool(client.call("DELETE", f"/admin/bans/{user}")["status"] == "unbanned")

    click.echo(f"unbanned {user}" if _run(settings, local, over_api) else f"{user} was not banned")


@admin_group.command("invalidate")
@click.argument("submission_id", type=int)
@click.option("--reason", required=True, help="Kept with it; shown with the submission.")
@click.pass_obj
def invalidate_command(settings: Settings, submission_id: int, reason: str) -> None:
    """Take a submission out of every ranking (kept; `restore` undoes it)."""

    async def local(app: App) -> None:
        await app.service.invalidate_submission(submission_id, reason, _actor())

    def over_api(client: ApiClient) -> None:
        client.call("POST", f"/admin/submissions/{submission_id}/invalidate", {"reason": reason})

    _run(settings, local, over_api)
    click.echo(f"invalidated submission {submission_id}: {reason}; its user is ranked again")


@admin_group.command("restore")
@click.argument("submission_id", type=int)
@click.pass_obj
def restore_command(settings: Settings, submission_id: int) -> None:
    """Undo `invalidate`: the submission ranks again where it is its user's best."""

    async def local(app: App) -> None:
        await app.service.restore_submission(submission_id)

    def over_api(client: ApiClient) -> None:
        client.call("POST", f"/admin/submissions/{submission_id}/restore")

    _run(settings, local, over_api)
    click.echo(f"restored submission {submission_id}")


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

    async def local(app: App) -> list[int]:
        jobs = await app.service.rerun(leaderboard, user=user, submission_id=submission_id)
        return sorted({j.submission_id for j in jobs})

    def over_api(client: ApiClient) -> list[int]:
        body = {"user": user, "submission_id": submission_id}
        return list(
            client.call("POST", f"/admin/leaderboards/{leaderboard}/rerun", body)["submissions"]
        )

    queued = _run(settings, local, over_api)
    click.echo(
        f"queued {len(queued)} submissions of {leaderboard} again: {', '.join(map(str, queued))}"
    )


@admin_group.command("close")
@click.argument("leaderboard")
@click.pass_obj
def close_command(settings: Settings, leaderboard: str) -> None:
    """Make LEADERBOARD invite-only: listed to and submittable by its members only."""

    async def local(app: App) -> None:
        await app.service.set_closed(leaderboard, True)

    def over_api(client: ApiClient) -> None:
        client.call("POST", f"/admin/leaderboards/{leaderboard}/close")

    _run(settings, local, over_api)
    click.echo(
        f"{leaderboard} is invite-only; mint codes with `admin invites {leaderboard} --mint N`"
    )


@admin_group.command("open")
@click.argument("leaderboard")
@click.pass_obj
def open_command(settings: Settings, leaderboard: str) -> None:
    """Open LEADERBOARD to everyone again."""

    async def local(app: App) -> None:
        await app.service.set_closed(leaderboard, False)

    def over_api(client: ApiClient) -> None:
        client.call("POST", f"/admin/leaderboards/{leaderboard}/open")

    _run(settings, local, over_api)
    click.echo(f"{leaderboard} is open to everyone")


@admin_group.command("invites")
@click.argument("leaderboard")
@click.option("--mint", "count", type=int, default=None, help="Mint this many new codes.")
@click.option("--uses", type=int, default=1, show_default=True, help="Users each new code admits.")
@click.pass_obj
def invites_command(settings: Settings, leaderboard: str, count: int | None, uses: int) -> None:
    """List LEADERBOARD's invite codes, or mint new ones (printed one per line)."""
    if count is not None:

        async def mint(app: App) -> list[str]:
            return await app.service.mint_invites(leaderboard, count, uses, _actor())

        def mint_over_api(client: ApiClient) -> list[str]:
            body = {"leaderboard": leaderboard, "count": count, "max_uses": uses}
            return list(client.call("POST", "/admin/invites", body)["codes"])

        click.echo("\n".join(_run(settings, mint, mint_over_api)))
        return

    async def listed(app: App) -> list[Any]:
        return [i.to_json() for i in await app.service.invites(leaderboard)]

    def listed_over_api(client: ApiClient) -> list[Any]:
        return list(client.get(f"/admin/leaderboards/{leaderboard}/invites"))

    found = _run(settings, listed, listed_over_api)
    for invite in found:
        state = "revoked" if invite["revoked"] else f"{invite['uses']}/{invite['max_uses']} used"
        click.echo(f"{invite['code']}  {state}  ({invite['created_by']}, {invite['created_at']})")
    if not found:
        click.echo(f"{leaderboard} has no invite codes")


@admin_group.command("revoke-invite")
@click.argument("code")
@click.pass_obj
def revoke_invite_command(settings: Settings, code: str) -> None:
    """Stop CODE from admitting anyone else (who joined with it stays)."""

    async def local(app: App) -> bool:
        return await app.service.revoke_invite(code)

    def over_api(client: ApiClient) -> bool:
        return bool(client.call("DELETE", f"/admin/invites/{code}")["status"] == "revoked")

    revoked = _run(settings, local, over_api)
    click.echo(f"revoked {code}" if revoked else f"{code} is unknown or already revoked")


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
    if per_hour is None and daily is None and not clear:
        _show_quotas(settings, user)
        return

    async def local(app: App) -> bool:
        if clear:
            return await app.service.clear_quota(user)
        await app.service.set_quota(
            Submitter(user, user), per_hour=per_hour, daily=daily, actor=_actor()
        )
        return True

    def over_api(client: ApiClient) -> bool:
        if clear:
            return bool(client.call("DELETE", f"/admin/quotas/{user}")["status"] == "cleared")
        client.call("PUT", f"/admin/quotas/{user}", {"per_hour": per_hour, "daily": daily})
        return True

    done = _run(settings, local, over_api)
    if clear:
        click.echo(f"{user} has the deployment's quotas" if done else f"{user} had none")
    else:
        click.echo(
            f"quotas of {user}: per hour {per_hour or 'default'}, daily {daily or 'default'}"
        )


def _show_quotas(settings: Settings, user: str) -> None:
    async def local(app: App) -> Any:
        return (await app.service.quota_of(user)).to_json()

    def over_api(client: ApiClient) -> Any:
        return client.get(f"/admin/quotas/{user}")

    click.echo(format_user_quotas(_run(settings, local, over_api)))


@admin_group.command("status")
@click.pass_obj
def status_command(settings: Settings) -> None:
    """What is paused, who is banned and who has quotas of their own."""

    async def local(app: App) -> ControlsJson:
        pauses = [p.to_json() for p in await app.service.pauses()]
        bans = [b.to_json() for b in await app.service.bans()]
        return pauses, bans, [q.to_json() for q in await app.service.custom_quotas()]

    def over_api(client: ApiClient) -> ControlsJson:
        return client.get("/admin/pauses"), client.get("/admin/bans"), client.get("/admin/quotas")

    click.echo(format_controls(*_run(settings, local, over_api)))


@admin_group.command("stats")
@click.option("--last-day", is_flag=True, help="Only the last 24 hours.")
@click.option("--json", "as_json", is_flag=True, help="The numbers as JSON.")
@click.pass_obj
def stats_command(settings: Settings, last_day: bool, as_json: bool) -> None:
    """Submissions, users, runs and queue waits per GPU, failures by verdict."""

    async def local(app: App) -> Any:
        return (await app.service.stats(last_day=last_day)).to_json()

    def over_api(client: ApiClient) -> Any:
        return client.get("/admin/stats", last_day_only=str(last_day).lower())

    found = _run(settings, local, over_api)
    click.echo(json.dumps(found, indent=2) if as_json else format_stats(found))
