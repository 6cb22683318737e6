"""Invite-only leaderboards: hidden from and closed to non-members; a code admits as many
users as it may, once each, even when they race; a revoked code admits nobody new."""

from __future__ import annotations

import asyncio

import pytest

from cluster_manager.service import InvalidInviteError, InvalidMintError, NotFoundError, Submitter
from tests.storage.helpers import ALICE, BOB, CAROL, make_board, submit


@pytest.fixture
async def closed(service):
    await make_board(service, "public")
    await make_board(service, "secret-round")
    await service.invites.set_closed("secret-round", True)


async def names(service, user=None, **kwargs) -> list[str]:
    return [b.name for b in await service.leaderboards.all(user, **kwargs)]


async def test_a_closed_board_is_hidden_and_refused_until_joined(service, closed):
    assert await names(service) == ["public"]
    assert await names(service, ALICE) == ["public"]
    assert sorted(await names(service, include_closed=True)) == ["public", "secret-round"]
    assert await service.leaderboards.names("secret", ALICE) == []
    # Word for word as a board that does not exist: nothing says that it is invite-only.
    with pytest.raises(NotFoundError, match=r"^there is no leaderboard named 'secret-round'$"):
        await submit(service, "secret-round", ALICE)
    (code,) = await service.invites.mint("secret-round", 1, 1, "org")
    assert await service.invites.join(code, ALICE) == ("secret-round", True)
    assert await service.invites.join(code, ALICE) == ("secret-round", False)  # no second use
    assert sorted(await names(service, ALICE)) == ["public", "secret-round"]
    assert await service.leaderboards.names("secret", ALICE) == ["secret-round"]
    await submit(service, "secret-round", ALICE)
    await service.invites.set_closed("secret-round", False)
    assert sorted(await names(service, BOB)) == ["public", "secret-round"]


@pytest.mark.reliability(
    "Access",
    "redeeming an invite code more often than it may be used: one after another, and 5 users "
    "racing for a code good for 2",
    "exactly as many users join as the code allows; the rest get 'used as often as it may "
    "be'; a revoked code admits nobody",
)
async def test_a_code_admits_only_its_count_even_when_users_race(service, pool, closed):
    (code,) = await service.invites.mint("secret-round", 1, 2, "org")
    racers = [Submitter(f"user{i}", f"user{i}") for i in range(5)]
    outcomes = await asyncio.gather(
        *(service.invites.join(code, user) for user in racers), return_exceptions=True
    )
    joined = [o for o in outcomes if isinstance(o, tuple)]
    refused = [o for o in outcomes if isinstance(o, InvalidInviteError)]
    assert len(joined) == 2 and len(refused) == 3
    assert all("used as often as it may be" in str(e) for e in refused)
    assert await pool.fetchval("SELECT count(*) FROM leaderboard_members") == 2
    (listed,) = await service.invites.all("secret-round")
    assert (listed.uses, listed.max_uses, listed.revoked) == (2, 2, False)

    (fresh,) = await service.invites.mint("secret-round", 1, 5, "org")
    assert await service.invites.revoke(fresh) is True
    assert await service.invites.revoke(fresh) is False
    with pytest.raises(InvalidInviteError, match="unknown or was revoked"):
        await service.invites.join(fresh, CAROL)
    with pytest.raises(InvalidInviteError, match="unknown or was revoked"):
        await service.invites.join("inv_nope", CAROL)


async def test_minting_is_bounded(service, closed):
    codes = await service.invites.mint("secret-round", 3, 1, "org")
    assert len(set(codes)) == 3 and all(c.startswith("inv_") for c in codes)
    for count, uses in ((0, 1), (501, 1), (1, 0)):
        with pytest.raises(InvalidMintError):
            await service.invites.mint("secret-round", count, uses, "org")
