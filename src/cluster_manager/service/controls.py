"""Organisers' controls: pausing and resuming submissions (everywhere or per leaderboard),
banning users, invalidating submissions, per-user quota overrides, what a leaderboard's
Discord channel sees of its submissions (its channel policy), and the numbers they watch
(stats). Every front end's submissions and script runs pass `check_may_submit`."""

from __future__ import annotations

from datetime import timedelta

from cluster_manager.core.records import ChannelPolicy, Leaderboard, User
from cluster_manager.service.context import Context
from cluster_manager.service.errors import (
    BannedError,
    InvalidChannelPolicyError,
    InvalidQuotaError,
    MissingReasonError,
    NotFoundError,
    SubmissionsPausedError,
    UnknownUserError,
)
from cluster_manager.service.leaderboards import find_leaderboard
from cluster_manager.service.quotas import QuotaPolicy, UserQuotas, user_quotas
from cluster_manager.service.receipts import Submitter
from cluster_manager.storage import controls as control_store
from cluster_manager.storage import history as history_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import quotas as quota_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import stats as stats_store
from cluster_manager.storage import submissions as sub_store
from cluster_manager.storage.controls import Ban, Pause
from cluster_manager.storage.database import Executor
from cluster_manager.storage.leaderboards import AfterDeadlineRefusal, ChannelPolicySetting
from cluster_manager.storage.quotas import CustomQuota
from cluster_manager.storage.stats import Stats

MAX_REASON_CHARS = 500


def _reason(reason: str) -> str:
    reason = " ".join(reason.split())
    if not reason:
        raise MissingReasonError("say why: the reason is shown to the users it stops")
    return reason[:MAX_REASON_CHARS]


async def check_may_submit(db: Executor, *, leaderboard_id: int | None, user_id: int) -> None:
    """Refuses a submission (or a script run, `leaderboard_id` None) while submissions are
    paused there or the user is banned."""
    paused = await control_store.pause_of(db, leaderboard_id)
    if paused is not None:
        where = f"on {paused.leaderboard!r}" if paused.leaderboard else "everywhere"
        raise SubmissionsPausedError(
            f"submissions are paused {where}: {paused.reason} (queued jobs still run)"
        )
    await check_not_banned(db, user_id, "submit")


async def check_not_banned(db: Executor, user_id: int, action: str) -> None:
    """A banned user is refused every action that puts them in a ranking or a team: submitting,
    every team action (a team would carry their scores in under another name) and joining an
    invite-only leaderboard with a code."""
    banned = await control_store.ban_of(db, user_id)
    if banned is not None:
        raise BannedError(f"you may not {action} here: {banned.reason}")


class Controls:
    """Organisers' controls: pausing, bans, invalidation, quotas, channel policies, runs after
    the deadline, stats."""

    def __init__(self, ctx: Context, quotas: QuotaPolicy) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock
        self.allow_unsandboxed_ranking = ctx.allow_unsandboxed_ranking
        self.quotas = quotas

    async def pause(self, leaderboard: str | None, reason: str, actor: str) -> Pause:
        """Stops new submissions (everywhere with None); jobs already queued keep running."""
        board_id, name = await self._scope(leaderboard)
        await control_store.pause(self.pool, board_id, _reason(reason), actor, self.clock())
        return next(p for p in await control_store.pauses(self.pool) if p.leaderboard == name)

    async def resume(self, leaderboard: str | None) -> bool:
        """Ends a pause; False when that scope was not paused."""
        board_id, _ = await self._scope(leaderboard)
        return await control_store.resume(self.pool, board_id)

    async def pauses(self) -> list[Pause]:
        return await control_store.pauses(self.pool)

    async def ban(
        self, user: Submitter, reason: str, actor: str, *, known_only: bool = False
    ) -> Ban:
        """Refuses the user's submissions from now on and hides their rankings (kept, so that
        unbanning shows them again). With `known_only`, a name never seen here is refused
        (`UnknownUserError`): a typo would otherwise ban nobody and say it worked."""
        if known_only:
            await self._known_user(user.external_id)
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await control_store.ban(conn, found.id, _reason(reason), actor, self.clock())
            await history_store.bump_history_of_user(conn, found.id)  # their chart lines go
            ban = await control_store.ban_of(conn, found.id)
        assert ban is not None
        return ban

    async def unban(self, external_id: str) -> bool:
        found = await self._known_user(external_id)
        async with self.pool.acquire() as conn, conn.transaction():
            lifted = await control_store.unban(conn, found.id)
            await history_store.bump_history_of_user(conn, found.id)
        return lifted

    async def bans(self) -> list[Ban]:
        return await control_store.bans(self.pool)

    async def invalidate(self, submission_id: int, reason: str, actor: str) -> None:
        """Takes a submission out of every ranking and chart (kept, with why and who), and
        ranks its user again from their other submissions, in one transaction."""
        await self._set_invalidated(submission_id, _reason(reason), actor)

    async def restore(self, submission_id: int) -> None:
        """Undoes `invalidate`: it ranks again if it is its user's best."""
        await self._set_invalidated(submission_id, None, None)

    async def _set_invalidated(
        self, submission_id: int, reason: str | None, actor: str | None
    ) -> None:
        found = await sub_store.get_submission(self.pool, submission_id)
        if found is None:
            raise NotFoundError(f"there is no submission {submission_id}")
        now = self.clock() if reason is not None else None
        async with self.pool.acquire() as conn, conn.transaction():
            await sub_store.set_invalidated(conn, submission_id, reason, actor, now)
            await history_store.bump_history(conn, found.leaderboard_id)
            await run_store.rerank_user(
                conn,
                leaderboard_id=found.leaderboard_id,
                user_id=found.user_id,
                allow_unsandboxed=self.allow_unsandboxed_ranking,
            )

    async def set_quota(
        self, user: Submitter, *, per_hour: int | None, daily: int | None, actor: str
    ) -> None:
        """Overrides the user's hourly limit per leaderboard and/or daily quota (None keeps
        the deployment's); GPU caps still hold."""
        if per_hour is None and daily is None:
            raise InvalidQuotaError("give a per-hour limit, a daily quota, or both")
        for value in (per_hour, daily):
            if value is not None and value <= 0:
                raise InvalidQuotaError(f"a quota is a positive number, not {value}")
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await quota_store.set_override(conn, found.id, per_hour, daily, actor, self.clock())

    async def clear_quota(self, external_id: str) -> bool:
        found = await self._known_user(external_id)
        return await quota_store.clear_override(self.pool, found.id)

    async def quota_of(self, external_id: str) -> UserQuotas:
        """The user's quotas as they hold now, and whether an admin set them."""
        found = await self._known_user(external_id)
        return await user_quotas(self.pool, self.quotas, found, self.clock())

    async def custom_quotas(self) -> list[CustomQuota]:
        """Every user's override, by user."""
        return await quota_store.custom_quotas(self.pool)

    async def set_channel_policy(
        self, name: str, policy: ChannelPolicy | str, actor: str
    ) -> Leaderboard:
        """Sets what the leaderboard's channel sees of its submissions (`ChannelPolicy`, or
        its value: "ranked", "none", "all"), recording who set it; the leaderboard as it is
        now. An invite-only leaderboard's channel sees nothing whatever its policy
        (`Leaderboard.publishes`)."""
        try:
            chosen = ChannelPolicy(policy)
        except ValueError:
            known = ", ".join(p.value for p in ChannelPolicy)
            raise InvalidChannelPolicyError(
                f"a channel policy is one of {known}, not {policy!r}"
            ) from None
        board = await find_leaderboard(self.pool, name)
        await lb_store.set_channel_policy(self.pool, board.id, chosen, actor, self.clock())
        return await find_leaderboard(self.pool, board.name)

    async def set_after_deadline_runs(self, name: str, allowed: bool, actor: str) -> Leaderboard:
        """Whether the leaderboard takes runs after its deadline (ranked on their own, never
        in the competition's ranking), recording who set it; the leaderboard as it is now."""
        board = await find_leaderboard(self.pool, name)
        await lb_store.set_after_deadline_runs(self.pool, board.id, allowed, actor, self.clock())
        return await find_leaderboard(self.pool, board.name)

    async def after_deadline_refusals(self) -> list[AfterDeadlineRefusal]:
        """The leaderboards that take no runs after their deadline, with who set each and
        when."""
        return await lb_store.after_deadline_refusals(self.pool)

    async def channel_policies(self) -> list[ChannelPolicySetting]:
        """The leaderboards whose channel policy is not the default ("ranked"), with who set
        each and when."""
        return await lb_store.channel_policies(self.pool)

    async def _known_user(self, external_id: str) -> User:
        found = await lb_store.get_user(self.pool, external_id)
        if found is None:
            raise UnknownUserError(f"there is no user {external_id!r}")
        return found

    async def stats(self, *, last_day: bool = False) -> Stats:
        """Submissions, users, runs and queue waits per GPU, failures by verdict: over all
        time, or the last 24 hours."""
        since = self.clock() - timedelta(days=1) if last_day else None
        return await stats_store.stats(self.pool, since)

    async def _scope(self, leaderboard: str | None) -> tuple[int | None, str | None]:
        """(id, name) of the leaderboard a control applies to; (None, None) for all."""
        if leaderboard is None:
            return None, None
        board = await find_leaderboard(self.pool, leaderboard)
        return board.id, board.name
