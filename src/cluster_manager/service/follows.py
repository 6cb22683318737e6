"""The follows half of `Service`: which submissions a front end still owes a report."""

from __future__ import annotations

import asyncpg

from cluster_manager.storage import follows as follow_store
from cluster_manager.storage.follows import Follow


class Follows:
    pool: asyncpg.Pool

    async def follow_started(self, submission_id: int, member_id: int, channel_id: int) -> None:
        await follow_store.start(self.pool, Follow(submission_id, member_id, channel_id))

    async def follow_reported(self, submission_id: int) -> None:
        await follow_store.end(self.pool, submission_id)

    async def unreported_follows(self) -> list[Follow]:
        return await follow_store.unreported(self.pool)
