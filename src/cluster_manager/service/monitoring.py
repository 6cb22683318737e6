"""What `/metrics` watches: per GPU type the queue and the schedulers that serve it, and the
jobs that ended, as the database holds them for every process that shares it."""

from __future__ import annotations

import asyncpg

from cluster_manager.storage import metrics as metrics_store
from cluster_manager.storage.metrics import DISPATCH_ERROR as DISPATCH_ERROR
from cluster_manager.storage.metrics import LOST as LOST
from cluster_manager.storage.metrics import NOT_DISPATCHED as NOT_DISPATCHED
from cluster_manager.storage.metrics import RUN_SECONDS_BUCKETS as RUN_SECONDS_BUCKETS
from cluster_manager.storage.metrics import EndedJobs as EndedJobs
from cluster_manager.storage.metrics import Figures as Figures
from cluster_manager.storage.metrics import GpuLoad as GpuLoad
from cluster_manager.storage.metrics import RunSeconds as RunSeconds


class Monitoring:
    """The monitoring half of `Service`."""

    pool: asyncpg.Pool

    async def monitoring_figures(self) -> Figures:
        """The queue, the live schedulers and the ended jobs, read now (storage.metrics)."""
        return await metrics_store.figures(self.pool)
