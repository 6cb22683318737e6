"""What `/metrics` watches: per GPU type the queue and the schedulers that serve it, and the
jobs that ended, as the database holds them for every process that shares it; and what
`/health` asks (the database's round trip, the GPU types served)."""

from __future__ import annotations

from cluster_manager.service.context import Context
from cluster_manager.storage import metrics as metrics_store
from cluster_manager.storage import served as served_store
from cluster_manager.storage.database import round_trip_ms
from cluster_manager.storage.metrics import DISPATCH_ERROR as DISPATCH_ERROR
from cluster_manager.storage.metrics import LOST as LOST
from cluster_manager.storage.metrics import NOT_DISPATCHED as NOT_DISPATCHED
from cluster_manager.storage.metrics import RUN_SECONDS_BUCKETS as RUN_SECONDS_BUCKETS
from cluster_manager.storage.metrics import EndedJobs as EndedJobs
from cluster_manager.storage.metrics import Figures as Figures
from cluster_manager.storage.metrics import GpuLoad as GpuLoad
from cluster_manager.storage.metrics import RunSeconds as RunSeconds


class Monitoring:
    """What `/metrics` and `/health` read."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool

    async def figures(self) -> Figures:
        """The queue, the live schedulers and the ended jobs, read now (storage.metrics)."""
        return await metrics_store.figures(self.pool)

    async def database_ms(self) -> float:
        """One round trip to the database, in milliseconds (`/health`)."""
        return await round_trip_ms(self.pool)

    async def served_gpus(self) -> list[str]:
        """The GPU types that a live scheduler runs (storage.served)."""
        return await served_store.served_gpus(self.pool)
