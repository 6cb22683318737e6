"""One process per role and key: the second is refused with who holds it, until it stops."""

from __future__ import annotations

import pytest

from cluster_manager.storage.database import create_pool
from cluster_manager.storage.singletons import AlreadyRunningError, held_alone, lock_key, lock_parts


@pytest.mark.reliability(
    "Faults",
    "a second Discord bot process starts with the same token on the same database",
    "refused at once, naming the running one (host, pid, since when); it starts once that stops",
)
async def test_a_second_holder_is_refused_with_who_holds_it(db_url: str, record_property):
    first, second = await create_pool(db_url, max_size=2), await create_pool(db_url, max_size=2)
    try:
        async with held_alone(first, "discord bot", "token-a"):
            with pytest.raises(AlreadyRunningError) as refused:
                async with held_alone(second, "discord bot", "token-a"):
                    pass
            record_property("observed", str(refused.value))
            assert "a discord bot already runs" in str(refused.value)
            assert "pid" in str(refused.value) and "connected since" in str(refused.value)
            # Another token is another bot.
            async with held_alone(second, "discord bot", "token-b"):
                pass
        async with held_alone(second, "discord bot", "token-a"):
            pass
        # The lock went with the block: the connection back in the pool holds it no more.
        held = await first.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
            " AND classid::bigint = $1 AND objid::bigint = $2",
            *lock_parts(lock_key("discord bot", "token-a")),
        )
        assert held == 0
    finally:
        await first.close()
        await second.close()
