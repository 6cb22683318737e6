"""Quotas that hold against floods of generated submissions: per leaderboard an hourly limit
for test/benchmark runs and one for ranked runs, a cap per scarce GPU type, a daily quota
per user (lower for new accounts), and admins' per-user overrides. Every refusal says when
the user may try again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from cluster_manager.core.gpus import GpuRegistry
from cluster_manager.core.models import Mode
from cluster_manager.core.records import Leaderboard, User
from cluster_manager.service.rates import RATE_WINDOW, check_rate
from cluster_manager.storage import quotas as quota_store
from cluster_manager.storage import teams as team_store
from cluster_manager.storage.database import Connection, Executor
from cluster_manager.storage.quotas import CustomQuota, QuotaOverride

DAY = timedelta(days=1)
DISCORD_EPOCH_MS = 1420070400000


@dataclass(frozen=True)
class QuotaPolicy:
    """A deployment's quotas (settings); a leaderboard's own hourly limit comes first."""

    per_hour: int = 30  # per leaderboard: test, benchmark and profile runs
    ranked_per_hour: int | None = None  # per leaderboard: ranked runs (None: as per_hour)
    daily: int = 500  # per user, all leaderboards
    new_account_days: int = 0  # accounts younger than this get `new_account_daily` (0: off)
    new_account_daily: int = 50


def account_created(user: User, first_seen: datetime) -> datetime:
    """When the account was made: a Discord id says so itself (a snowflake), which also
    catches accounts made just to flood; other users count from when this service first saw
    them."""
    if user.external_id.isdigit() and int(user.external_id) >= 1 << 32:
        ms = (int(user.external_id) >> 22) + DISCORD_EPOCH_MS
        return datetime.fromtimestamp(ms / 1000, UTC)
    return first_seen


@dataclass(frozen=True)
class UserQuotas:
    """A user's quotas as they hold now (`admin quota USER`), and the override behind them,
    if any. A leaderboard's own hourly limit wins over the deployment's `per_hour`, never
    over an override's."""

    user: str  # external id
    name: str
    per_hour: int
    ranked_per_hour: int
    daily: int
    new_account: bool  # the lower daily quota of young accounts applies
    custom: CustomQuota | None

    def to_json(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "custom"},
            "custom": None if self.custom is None else self.custom.to_json(),
        }


def hourly_limit(
    policy: QuotaPolicy, override: QuotaOverride | None, board_limit: int | None, *, ranked: bool
) -> int:
    """Submissions per hour on one leaderboard: an override, else the board's own limit,
    else the deployment's (its ranked one for ranked runs)."""
    deployment = (policy.ranked_per_hour or policy.per_hour) if ranked else policy.per_hour
    return (override.per_hour if override else None) or board_limit or deployment


def is_new_account(policy: QuotaPolicy, user: User, first_seen: datetime, now: datetime) -> bool:
    if not policy.new_account_days:
        return False
    return now - account_created(user, first_seen) < timedelta(days=policy.new_account_days)


def daily_quota(policy: QuotaPolicy, override: QuotaOverride | None, *, new_account: bool) -> int:
    if override and override.daily:
        return override.daily
    return min(policy.daily, policy.new_account_daily) if new_account else policy.daily


async def user_quotas(db: Executor, policy: QuotaPolicy, user: User, now: datetime) -> UserQuotas:
    custom = await quota_store.custom_quota_of(db, user.id)
    override = None if custom is None else QuotaOverride(custom.per_hour, custom.daily)
    young = not (override and override.daily) and is_new_account(
        policy, user, await quota_store.first_seen(db, user.id), now
    )
    return UserQuotas(
        user=user.external_id,
        name=user.name,
        per_hour=hourly_limit(policy, override, None, ranked=False),
        ranked_per_hour=hourly_limit(policy, override, None, ranked=True),
        daily=daily_quota(policy, override, new_account=young),
        new_account=young,
        custom=custom,
    )


async def check_quotas(
    conn: Connection,
    *,
    policy: QuotaPolicy,
    registry: GpuRegistry,
    board: Leaderboard,
    user: User,
    mode: Mode,
    gpus: Sequence[str],
    now: datetime,
) -> None:
    """Refuses the submission with `RateLimitedError` when it would exceed a quota. Call in
    the submitting transaction. Where the leaderboard shares its hourly quota in a team
    (`team_quotas`), the team's submissions there count together; the daily quota and the GPU
    caps stay each user's."""
    counted = [user.id]
    if board.team_quotas:
        counted = await team_store.member_ids(conn, board.id, user.id)
    for user_id in sorted(counted):  # always in one order: racing team-mates never deadlock
        await quota_store.lock_user(conn, user_id)
    override = await quota_store.override_of(conn, user.id)
    ranked = mode is Mode.LEADERBOARD
    kind = "ranked submissions" if ranked else "test/benchmark submissions"
    limit = hourly_limit(policy, override, board.rate_limit_per_hour, ranked=ranked)
    recent = await quota_store.times_on_board(
        conn, user_ids=counted, leaderboard_id=board.id, ranked=ranked, since=now - RATE_WINDOW
    )
    whose = " for your team" if len(counted) > 1 else ""
    check_rate(recent, limit, now, f"{kind} per hour on {board.name!r}{whose}")
    if ranked:
        for gpu in gpus:
            cap = registry.get(gpu).ranked_per_user_per_hour
            if cap is not None:
                on_gpu = await quota_store.ranked_times_on_gpu(
                    conn, user_id=user.id, gpu=gpu, since=now - RATE_WINDOW
                )
                check_rate(on_gpu, cap, now, f"ranked submissions per hour on {gpu}")
    young = False
    if not (override and override.daily) and policy.new_account_days:
        young = is_new_account(policy, user, await quota_store.first_seen(conn, user.id), now)
    daily = daily_quota(policy, override, new_account=young)
    today = await quota_store.times_anywhere(conn, user_id=user.id, since=now - DAY)
    check_rate(today, daily, now, "submissions a day", window=DAY)
