"""Quotas against floods: ranked and other submissions counted apart per leaderboard, a cap
per scarce GPU type across leaderboards, a daily quota (lower for new accounts, Discord's
judged by the id's own timestamp), admins' overrides; each refusal says when to try again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cluster_manager.core.gpus import GpuRegistry, GpuType
from cluster_manager.core.models import Mode
from cluster_manager.service import RateLimitedError, Service, Submitter
from cluster_manager.service.quotas import QuotaPolicy, account_created
from tests.storage.helpers import ALICE, BOB, make_board, submit

REGISTRY = GpuRegistry(
    {
        "CPU": GpuType("CPU", "local", max_concurrent=2, devices=2),
        "H100": GpuType("H100", "fake", ranked_per_user_per_hour=1),
    }
)


def quota_service(pool, clock, **policy) -> Service:
    return Service(pool, REGISTRY, clock=clock, quotas=QuotaPolicy(**policy))


async def test_ranked_and_test_runs_have_their_own_hourly_limits(pool, clock):
    service = quota_service(pool, clock, per_hour=3, ranked_per_hour=1)
    await make_board(service)
    await submit(service, gpus=["CPU"])
    with pytest.raises(RateLimitedError, match="1 ranked submissions per hour on 'board'") as err:
        await submit(service, gpus=["CPU"])
    assert err.value.retry_after == timedelta(hours=1, seconds=1)
    for _ in range(3):
        await submit(service, gpus=["CPU"], mode=Mode.TEST)
    with pytest.raises(RateLimitedError, match="3 test/benchmark submissions per hour"):
        await submit(service, gpus=["CPU"], mode=Mode.BENCHMARK)
    clock.now += timedelta(hours=1, seconds=1)
    await submit(service, gpus=["CPU"])


@pytest.mark.reliability(
    "Access",
    "a flood of generated submissions: ranked runs on a scarce GPU across leaderboards, a "
    "day's worth beyond the quota, and a Discord account made yesterday",
    "refused with the limit and when to try again (Retry-After over HTTP); other users and "
    "GPU types unaffected",
)
async def test_a_scarce_gpu_is_capped_across_leaderboards(pool, clock):
    service = quota_service(pool, clock)
    await make_board(service, "a", gpus=["CPU", "H100"])
    await make_board(service, "b", gpus=["CPU", "H100"])
    await submit(service, "a", gpus=["H100"])
    with pytest.raises(RateLimitedError, match="1 ranked submissions per hour on H100"):
        await submit(service, "b", gpus=["H100"])
    await submit(service, "b", gpus=["CPU"])  # other GPU types are not capped
    await submit(service, "b", gpus=["H100"], mode=Mode.TEST)  # nor test runs
    await submit(service, "b", user=BOB, gpus=["H100"])  # nor other users


async def test_the_daily_quota_counts_every_leaderboard(pool, clock):
    service = quota_service(pool, clock, daily=3)
    await make_board(service, "a")
    await make_board(service, "b")
    for board in ("a", "b", "a"):
        await submit(service, board, mode=Mode.TEST)
    with pytest.raises(RateLimitedError, match="3 submissions a day; try again in 24 h 0 min"):
        await submit(service, "b", mode=Mode.TEST)
    await submit(service, "b", user=BOB, mode=Mode.TEST)


def snowflake(made: datetime) -> str:
    ms = int(made.timestamp() * 1000) - 1420070400000
    return str(ms << 22)


async def test_new_accounts_get_the_lower_daily_quota(pool, clock):
    service = quota_service(pool, clock, daily=10, new_account_days=7, new_account_daily=1)
    await make_board(service)
    young = Submitter(snowflake(clock.now - timedelta(days=1)), "fresh")
    old = Submitter(snowflake(clock.now - timedelta(days=400)), "veteran")
    assert account_created(
        await _user(service, young), datetime(2000, 1, 1, tzinfo=UTC)
    ) == pytest.approx(clock.now - timedelta(days=1), abs=timedelta(seconds=1))
    await submit(service, user=young, mode=Mode.TEST)
    with pytest.raises(RateLimitedError, match="1 submissions a day"):
        await submit(service, user=young, mode=Mode.TEST)
    for _ in range(2):
        await submit(service, user=old, mode=Mode.TEST)


async def _user(service, who: Submitter):
    from cluster_manager.storage import leaderboards as lb_store

    async with service.pool.acquire() as conn:
        return await lb_store.upsert_user(conn, who.external_id, who.name)


async def test_an_override_lifts_or_lowers_a_users_quotas(pool, clock):
    service = quota_service(pool, clock, per_hour=1, daily=100)
    await make_board(service)
    await service.controls.set_quota(ALICE, per_hour=3, daily=None, actor="org")
    for _ in range(3):
        await submit(service, mode=Mode.TEST)
    with pytest.raises(RateLimitedError, match="3 test/benchmark"):
        await submit(service, mode=Mode.TEST)
    await service.controls.set_quota(BOB, per_hour=5, daily=1, actor="org")
    await submit(service, user=BOB, mode=Mode.TEST)
    with pytest.raises(RateLimitedError, match="1 submissions a day"):
        await submit(service, user=BOB, mode=Mode.TEST)
    assert await service.controls.clear_quota("alice") is True
    assert await service.controls.clear_quota("alice") is False
    with pytest.raises(RateLimitedError, match="1 test/benchmark"):
        await submit(service, mode=Mode.TEST)
