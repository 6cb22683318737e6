"""Which submissions a front end still owes a report: a follow starts when a submission is
taken and ends once its report is sent, so that a restart sends the ones still owed."""

from __future__ import annotations

from cluster_manager.service.context import Context
from cluster_manager.storage import follows as follow_store
from cluster_manager.storage.follows import Follow


class Follows:
    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool

    async def started(self, submission_id: int, member_id: int, channel_id: int) -> None:
        await follow_store.start(self.pool, Follow(submission_id, member_id, channel_id))

    async def reported(self, submission_id: int) -> None:
        await follow_store.end(self.pool, submission_id)

    async def unreported(self) -> list[Follow]:
        return await follow_store.unreported(self.pool)
