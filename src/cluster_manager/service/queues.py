"""The queues as a waiting user sees them: per GPU type the jobs waiting and running, and
their own jobs' places in line."""

from __future__ import annotations

from cluster_manager.service.context import Context
from cluster_manager.service.receipts import QueueStatus, QueueView, Submitter
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import queue as queue_store


class Queues:
    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.registry = ctx.registry

    async def status(self, gpu: str) -> QueueStatus:
        """The jobs waiting and running on one GPU type, and its launcher."""
        return QueueStatus(
            gpu=gpu,
            launcher=self.registry.get(gpu).launcher,
            queued=await job_store.queued_count(self.pool, [gpu]),
            running=await job_store.active_on_gpu(self.pool, gpu),
        )

    async def view(self, user: Submitter | None = None) -> QueueView:
        """Per GPU type, the jobs waiting and running and whether a live scheduler runs it;
        with a user, their open jobs and their places in line."""
        mine = [] if user is None else await queue_store.open_jobs_of(self.pool, user.external_id)
        return QueueView(await queue_store.queues(self.pool), mine)
