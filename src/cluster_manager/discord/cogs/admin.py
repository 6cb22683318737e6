"""`/admin ...` for members with the Leaderboard Admin role: pause and resume submissions,
ban and unban users, quotas, invite codes, what a leaderboard's channel sees, whether it takes
runs after its deadline, its team rules, what is switched off, and the stats. Answers are
private."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands
from discord.ext import commands

from cluster_manager.core.teams import MAX_TEAM_SIZE
from cluster_manager.discord.autocomplete import leaderboard_names
from cluster_manager.discord.replies import MESSAGE_CHARS, answer, defer, fitted, truncate
from cluster_manager.discord.roles import admins_only, submitter
from cluster_manager.rendering.ops import (
    CHANNEL_SEES,
    format_controls,
    format_stats,
    format_user_quotas,
)
from cluster_manager.rendering.reports import counted
from cluster_manager.service import Service

if TYPE_CHECKING:
    from cluster_manager.discord.bot import ClusterBot


def actor(interaction: discord.Interaction) -> str:
    return f"discord:{interaction.user.name}"


POLICIES = [
    app_commands.Choice(
        name="ranked (default): a ranked submission's verdict and places", value="ranked"
    ),
    app_commands.Choice(name="none: no submission, only announcements", value="none"),
    app_commands.Choice(
        name="all: every submission's verdict, any mode (never its output)", value="all"
    ),
]


def after_deadline_state(name: str, allowed: bool) -> str:
    if allowed:
        return (
            f"⏰ **{name}** takes runs after its deadline: they rank on their own "
            "(`/leaderboard show after_deadline:True`), never in the competition's ranking, "
            "and the channel sees nothing of them."
        )
    return f"⏰ **{name}** takes no runs after its deadline: submissions past it are refused."


def team_rules(name: str, size: int, shared_quota: bool) -> str:
    quota = (
        "its hourly quota counts a team's submissions together"
        if shared_quota
        else "its hourly quota counts each member's submissions on their own"
    )
    return f"👥 **{name}** takes teams of up to {size} members; {quota}."


# Not listed to members (a server admin may open it to a role in the server's settings); the
# Leaderboard Admin role is still checked on every call.
@app_commands.guild_only()
@app_commands.default_permissions(manage_guild=True)
class AdminCog(
    commands.GroupCog,
    group_name="admin",
    group_description="Organisers' controls (Leaderboard Admin role)",
):
    def __init__(self, bot: ClusterBot) -> None:
        self.bot = bot
        super().__init__()

    @property
    def service(self) -> Service:
        return self.bot.app.service

    async def _say(self, interaction: discord.Interaction, content: str) -> None:
        """A short answer; one that echoes a long option (a reason, a code: Discord takes
        6,000 characters in one) keeps its start."""
        await answer(interaction, content=truncate(content, MESSAGE_CHARS), ephemeral=True)

    async def _say_long(
        self, interaction: discord.Interaction, text: str, *, file_name: str, **style: Any
    ) -> None:
        """A list that may run past Discord's 2,000 characters: its start, and all of it
        attached."""
        await answer(interaction, ephemeral=True, **fitted(text, file_name=file_name, **style))

    @app_commands.command(
        name="pause", description="Stop taking submissions (queued jobs still run)"
    )
    @app_commands.describe(
        reason="Shown to everyone whose submission it refuses",
        leaderboard="Only this leaderboard (default: all of them)",
    )
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def pause(
        self, interaction: discord.Interaction, reason: str, leaderboard: str | None = None
    ) -> None:
        await defer(interaction, ephemeral=True)
        found = await self.service.controls.pause(leaderboard, reason, actor(interaction))
        await self._say(
            interaction, f"⏸ Paused {found.leaderboard or 'everywhere'}: {found.reason}"
        )

    @app_commands.command(name="resume", description="Take submissions again")
    @app_commands.describe(leaderboard="Only this leaderboard (default: the global pause)")
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def resume(
        self, interaction: discord.Interaction, leaderboard: str | None = None
    ) -> None:
        await defer(interaction, ephemeral=True)
        where = leaderboard or "everywhere"
        resumed = await self.service.controls.resume(leaderboard)
        await self._say(
            interaction, f"▶️ Resumed {where}." if resumed else f"{where} was not paused."
        )

    @app_commands.command(
        name="ban", description="Refuse a user's submissions and hide their rankings"
    )
    @app_commands.describe(user="Who", reason="Shown to them when a submission is refused")
    @admins_only
    async def ban(self, interaction: discord.Interaction, user: discord.User, reason: str) -> None:
        await defer(interaction, ephemeral=True)
        found = await self.service.controls.ban(submitter(user), reason, actor(interaction))
        await self._say(interaction, f"⛔ Banned {user.mention}: {found.reason}")

    @app_commands.command(
        name="unban", description="Let a user submit again, and show their rankings"
    )
    @app_commands.describe(user="Who")
    @admins_only
    async def unban(self, interaction: discord.Interaction, user: discord.User) -> None:
        await defer(interaction, ephemeral=True)
        lifted = await self.service.controls.unban(submitter(user).external_id)
        await self._say(
            interaction,
            f"Unbanned {user.mention}." if lifted else f"{user.mention} was not banned.",
        )

    @app_commands.command(name="invalidate", description="Take a submission out of every ranking")
    @app_commands.describe(submission_id="The submission's id", reason="Kept with it")
    @admins_only
    async def invalidate(
        self, interaction: discord.Interaction, submission_id: int, reason: str
    ) -> None:
        await defer(interaction, ephemeral=True)
        await self.service.controls.invalidate(submission_id, reason, actor(interaction))
        await self._say(
            interaction, f"🚫 Submission {submission_id} is out of the rankings: {reason}"
        )

    @app_commands.command(name="restore", description="Undo /admin invalidate")
    @app_commands.describe(submission_id="The submission's id")
    @admins_only
    async def restore(self, interaction: discord.Interaction, submission_id: int) -> None:
        await defer(interaction, ephemeral=True)
        await self.service.controls.restore(submission_id)
        await self._say(interaction, f"Submission {submission_id} ranks again.")

    @app_commands.command(name="rerun", description="Run ranked submissions again after a task fix")
    @app_commands.describe(
        leaderboard="The leaderboard",
        user="Only this user's ranked submission",
        submission_id="Only this submission",
    )
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def rerun(
        self,
        interaction: discord.Interaction,
        leaderboard: str,
        user: discord.User | None = None,
        submission_id: int | None = None,
    ) -> None:
        await defer(interaction, ephemeral=True)
        who = None if user is None else submitter(user).external_id
        jobs = await self.service.reruns.enqueue(leaderboard, user=who, submission_id=submission_id)
        count = len({j.submission_id for j in jobs})
        await self._say(
            interaction,
            f"🔁 {counted(count, 'ranked submission')} of {leaderboard} queued again; each "
            "keeps its score until its rerun is in.",
        )

    @app_commands.command(name="close", description="Make a leaderboard invite-only")
    @app_commands.describe(leaderboard="The leaderboard")
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def close(self, interaction: discord.Interaction, leaderboard: str) -> None:
        await defer(interaction, ephemeral=True)
        await self.service.invites.set_closed(leaderboard, True)
        await self._say(
            interaction, f"🔒 {leaderboard} is invite-only; `/admin invites` mints codes."
        )

    @app_commands.command(name="open", description="Open an invite-only leaderboard to everyone")
    @app_commands.describe(leaderboard="The leaderboard")
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def open_(self, interaction: discord.Interaction, leaderboard: str) -> None:
        await defer(interaction, ephemeral=True)
        await self.service.invites.set_closed(leaderboard, False)
        await self._say(interaction, f"🔓 {leaderboard} is open to everyone.")

    @app_commands.command(name="invites", description="Mint invite codes, or list a board's codes")
    @app_commands.describe(
        leaderboard="The leaderboard",
        mint="How many new codes (default: list the codes)",
        uses="Users each new code admits",
    )
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def invites(
        self, interaction: discord.Interaction, leaderboard: str, mint: int = 0, uses: int = 1
    ) -> None:
        await defer(interaction, ephemeral=True)
        if mint:
            codes = await self.service.invites.mint(leaderboard, mint, uses, actor(interaction))
            await self._say_long(
                interaction,
                "\n".join(codes),
                file_name=f"{leaderboard}-new-invites.txt",
                head=f"🎟️ {len(codes)} codes for {leaderboard}:\n",
                code=True,
            )
            return
        found = await self.service.invites.all(leaderboard)
        lines = [
            f"{i.code}  {'revoked' if i.revoked else f'{i.uses}/{i.max_uses} used'}" for i in found
        ]
        await self._say_long(
            interaction,
            "\n".join(lines) if lines else "no codes yet",
            file_name=f"{leaderboard}-invites.txt",
            head=f"Invite codes of {leaderboard}:\n",
            code=True,
        )

    @app_commands.command(
        name="revoke-invite", description="Stop an invite code from admitting anyone"
    )
    @app_commands.describe(code="The invite code")
    @admins_only
    async def revoke_invite(self, interaction: discord.Interaction, code: str) -> None:
        await defer(interaction, ephemeral=True)
        revoked = await self.service.invites.revoke(code)
        await self._say(
            interaction,
            f"Revoked `{code}`." if revoked else f"`{code}` is unknown or already revoked.",
        )

    @app_commands.command(
        name="quota",
        description="A user's quotas now; or give them quotas of their own, or clear them",
    )
    @app_commands.describe(
        user="Who (alone: the quotas that hold for them now, and whose they are)",
        per_hour="Submissions per hour per leaderboard",
        daily="Submissions per day, all leaderboards",
        clear="Back to the deployment's quotas",
    )
    @admins_only
    async def quota(
        self,
        interaction: discord.Interaction,
        user: discord.User,
        per_hour: int | None = None,
        daily: int | None = None,
        clear: bool = False,
    ) -> None:
        await defer(interaction, ephemeral=True)
        if per_hour is None and daily is None and not clear:  # what holds for them now
            found = await self.service.controls.quota_of(submitter(user).external_id)
            await self._say_long(
                interaction,
                format_user_quotas(found.to_json()),
                file_name=f"quotas-{user.id}.txt",
                code=True,
            )
            return
        if clear:
            cleared = await self.service.controls.clear_quota(submitter(user).external_id)
            content = (
                f"{user.mention} has the deployment's quotas."
                if cleared
                else f"{user.mention} had none."
            )
        else:
            await self.service.controls.set_quota(
                submitter(user), per_hour=per_hour, daily=daily, actor=actor(interaction)
            )
            hourly, days = per_hour or "default", daily or "default"
            content = f"Quotas of {user.mention}: per hour {hourly}, daily {days}."
        await self._say(interaction, content)

    @app_commands.command(
        name="channel-policy", description="What the channel sees of a leaderboard's submissions"
    )
    @app_commands.describe(leaderboard="The leaderboard", policy="What the channel sees")
    @app_commands.choices(policy=POLICIES)
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def channel_policy(
        self,
        interaction: discord.Interaction,
        leaderboard: str,
        policy: app_commands.Choice[str],
    ) -> None:
        await defer(interaction, ephemeral=True)
        board = await self.service.controls.set_channel_policy(
            leaderboard, policy.value, actor(interaction)
        )
        content = (
            f"📣 **{board.name}**'s channel policy is {board.channel_policy.value}: the channel "
            f"sees {CHANNEL_SEES[board.channel_policy]}; output and files stay private."
        )
        if board.closed:
            content += (
                f"\n🔒 {board.name} is invite-only: its channel sees none of its submissions "
                "until `/admin open`."
            )
        await self._say(interaction, content)

    @app_commands.command(
        name="after-deadline", description="Whether a leaderboard takes runs after its deadline"
    )
    @app_commands.describe(
        leaderboard="The leaderboard",
        allowed="Take test, benchmark and ranked runs after the deadline, ranked on their own",
    )
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def after_deadline(
        self, interaction: discord.Interaction, leaderboard: str, allowed: bool
    ) -> None:
        await defer(interaction, ephemeral=True)
        board = await self.service.controls.set_after_deadline_runs(
            leaderboard, allowed, actor(interaction)
        )
        await self._say(interaction, after_deadline_state(board.name, board.after_deadline_runs))

    @app_commands.command(name="teams", description="A leaderboard's team size and quota rule")
    @app_commands.describe(
        leaderboard="The leaderboard",
        size="The most members a team may have (teams already larger keep theirs)",
        shared_quota="Count a team's submissions together against the hourly quota",
    )
    @app_commands.autocomplete(leaderboard=leaderboard_names)
    @admins_only
    async def teams(
        self,
        interaction: discord.Interaction,
        leaderboard: str,
        size: app_commands.Range[int, 1, MAX_TEAM_SIZE] | None = None,
        shared_quota: bool | None = None,
    ) -> None:
        await defer(interaction, ephemeral=True)
        board = await self.service.teams.set_rules(leaderboard, size=size, quotas=shared_quota)
        await self._say(interaction, team_rules(board.name, board.team_size, board.team_quotas))

    @app_commands.command(
        name="status", description="What is paused, who is banned, custom quotas and policies"
    )
    @admins_only
    async def status(self, interaction: discord.Interaction) -> None:
        await defer(interaction, ephemeral=True)
        service = self.service
        text = format_controls(
            [p.to_json() for p in await service.controls.pauses()],
            [b.to_json() for b in await service.controls.bans()],
            [q.to_json() for q in await service.controls.custom_quotas()],
            [c.to_json() for c in await service.controls.channel_policies()],
            [r.to_json() for r in await service.controls.after_deadline_refusals()],
        )
        await self._say_long(interaction, text, file_name="status.txt")

    @app_commands.command(name="stats", description="Submissions, runs, queue waits and failures")
    @app_commands.describe(last_day="Only the last 24 hours")
    @admins_only
    async def stats(self, interaction: discord.Interaction, last_day: bool = False) -> None:
        await defer(interaction, ephemeral=True)
        found = await self.service.controls.stats(last_day=last_day)
        await self._say_long(
            interaction, format_stats(found.to_json()), file_name="stats.txt", code=True
        )
