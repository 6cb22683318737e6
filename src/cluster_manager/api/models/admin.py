"""The organisers' answers (the admin token's `/admin/...`) on submissions and users: pauses,
bans, invites, quotas, stats."""

from __future__ import annotations

from typing import Literal, Self

from cluster_manager.api.models.base import ApiModel, Moment
from cluster_manager.service.port import (
    Ban,
    CustomQuota,
    GpuStats,
    Invite,
    Pause,
    Stats,
    UserQuotas,
)


class PauseView(ApiModel):
    leaderboard: str | None  # null: every leaderboard
    reason: str
    paused_by: str
    paused_at: Moment

    @classmethod
    def of(cls, pause: Pause) -> Self:
        return cls(
            leaderboard=pause.leaderboard,
            reason=pause.reason,
            paused_by=pause.paused_by,
            paused_at=pause.paused_at,
        )

    def to_record(self) -> Pause:
        return Pause(self.leaderboard, self.reason, self.paused_by, self.paused_at)


class _Stopped(ApiModel):
    status: Literal["stopped"] = "stopped"


class Stopped(PauseView, _Stopped):
    """`POST /admin/stop`: `status` first, then the pause."""


class Started(ApiModel):
    status: Literal["started"] = "started"
    leaderboard: str | None
    was_paused: bool


class BanView(ApiModel):
    user: str  # the user's id as the bot or the CLI knows them
    name: str
    reason: str
    banned_by: str
    banned_at: Moment

    @classmethod
    def of(cls, ban: Ban) -> Self:
        return cls(
            user=ban.user,
            name=ban.name,
            reason=ban.reason,
            banned_by=ban.banned_by,
            banned_at=ban.banned_at,
        )

    def to_record(self) -> Ban:
        return Ban(self.user, self.name, self.reason, self.banned_by, self.banned_at)


class _Banned(ApiModel):
    status: Literal["banned"] = "banned"


class Banned(BanView, _Banned):
    """`PUT /admin/bans/{user}`: `status` first, then the ban."""


class InviteView(ApiModel):
    code: str
    leaderboard: str
    max_uses: int
    uses: int
    created_by: str
    created_at: Moment
    revoked: bool

    @classmethod
    def of(cls, invite: Invite) -> InviteView:
        return cls(
            code=invite.code,
            leaderboard=invite.leaderboard,
            max_uses=invite.max_uses,
            uses=invite.uses,
            created_by=invite.created_by,
            created_at=invite.created_at,
            revoked=invite.revoked,
        )

    def to_record(self) -> Invite:
        return Invite(
            self.code,
            self.leaderboard,
            self.max_uses,
            self.uses,
            self.created_by,
            self.created_at,
            self.revoked,
        )


class Minted(ApiModel):
    """`POST /admin/invites`: the new codes, each good for `max_uses` users."""

    leaderboard: str
    max_uses: int
    codes: list[str]


class CustomQuotaView(ApiModel):
    """An admin's override of a user's quotas, with who set it."""

    user: str
    name: str
    per_hour: int | None
    daily: int | None
    set_by: str
    set_at: Moment

    @classmethod
    def of(cls, quota: CustomQuota) -> CustomQuotaView:
        return cls(
            user=quota.user,
            name=quota.name,
            per_hour=quota.per_hour,
            daily=quota.daily,
            set_by=quota.set_by,
            set_at=quota.set_at,
        )

    def to_record(self) -> CustomQuota:
        return CustomQuota(
            self.user, self.name, self.per_hour, self.daily, self.set_by, self.set_at
        )


class UserQuotasView(ApiModel):
    """A user's quotas as they hold now, and the override behind them, if any."""

    user: str
    name: str
    per_hour: int
    ranked_per_hour: int
    daily: int
    new_account: bool  # the lower daily quota of young accounts applies
    custom: CustomQuotaView | None

    @classmethod
    def of(cls, quotas: UserQuotas) -> UserQuotasView:
        return cls(
            user=quotas.user,
            name=quotas.name,
            per_hour=quotas.per_hour,
            ranked_per_hour=quotas.ranked_per_hour,
            daily=quotas.daily,
            new_account=quotas.new_account,
            custom=None if quotas.custom is None else CustomQuotaView.of(quotas.custom),
        )

    def to_record(self) -> UserQuotas:
        return UserQuotas(
            user=self.user,
            name=self.name,
            per_hour=self.per_hour,
            ranked_per_hour=self.ranked_per_hour,
            daily=self.daily,
            new_account=self.new_account,
            custom=None if self.custom is None else self.custom.to_record(),
        )


class QuotaSet(ApiModel):
    status: Literal["set"] = "set"
    user: str
    per_hour: int | None
    daily: int | None


class GpuStatsView(ApiModel):
    runs: int
    queued: int  # now
    running: int  # now
    wait_p50_s: float | None  # from enqueued to claimed, over the period
    wait_p95_s: float | None

    @classmethod
    def of(cls, gpu: GpuStats) -> GpuStatsView:
        return cls(
            runs=gpu.runs,
            queued=gpu.queued,
            running=gpu.running,
            wait_p50_s=gpu.wait_p50_s,
            wait_p95_s=gpu.wait_p95_s,
        )

    def to_record(self) -> GpuStats:
        return GpuStats(self.runs, self.queued, self.running, self.wait_p50_s, self.wait_p95_s)


class StatsView(ApiModel):
    """Counts since `since` (null: all time): submissions, who submitted, every user known,
    runs, jobs given up on, runs by verdict, and per GPU type."""

    since: Moment | None
    submissions: int
    submitters: int
    users: int
    runs: int
    failed_jobs: int
    verdicts: dict[str, int]
    gpus: dict[str, GpuStatsView]

    @classmethod
    def of(cls, stats: Stats) -> StatsView:
        return cls(
            since=stats.since,
            submissions=stats.submissions,
            submitters=stats.submitters,
            users=stats.users,
            runs=stats.runs,
            failed_jobs=stats.failed_jobs,
            verdicts=dict(stats.verdicts),
            gpus={gpu: GpuStatsView.of(g) for gpu, g in stats.gpus.items()},
        )

    def to_record(self) -> Stats:
        return Stats(
            since=self.since,
            submissions=self.submissions,
            submitters=self.submitters,
            users=self.users,
            runs=self.runs,
            failed_jobs=self.failed_jobs,
            verdicts=dict(self.verdicts),
            gpus={gpu: g.to_record() for gpu, g in self.gpus.items()},
        )
