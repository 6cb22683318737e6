"""Quick script runs (`/run`): a slot of the GPU type, held while the script runs.

Scripts and queued jobs share a GPU type's concurrency; a slot is a lease in the database, so
a bot that dies mid-run frees it when the lease lapses.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from cluster_manager.core.gpus import GpuType
from cluster_manager.core.models import RunRequest
from cluster_manager.core.records import dispatch_key
from cluster_manager.core.run_results import RunResult
from cluster_manager.launchers.base import Launcher, ProgressCallback
from cluster_manager.service import script_launch
from cluster_manager.service.context import Context
from cluster_manager.service.controls import check_may_submit
from cluster_manager.service.errors import GpuBusyError
from cluster_manager.service.rates import RATE_WINDOW, check_rate, human_duration
from cluster_manager.service.receipts import Submitter
from cluster_manager.storage import installation as installation_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import scripts as script_store
from cluster_manager.storage.database import DatabaseUnavailableError

# A script's slot lapses this long after its holder stops renewing it (the bot died).
SCRIPT_LEASE_S = 30.0
SCRIPT_SLOT_POLL_S = 1.0

StateCallback = Callable[[str], Awaitable[None]]


class ScriptRuns:
    """Script runs (`/run`): their GPU slots and per-user limit."""

    def __init__(
        self,
        ctx: Context,
        *,
        rate_limit_per_hour: int,
        wait_s: float,
        installation: str | None = None,
    ) -> None:
        self.pool = ctx.pool
        self.registry = ctx.registry
        self.clock = ctx.clock
        self.rate_limit_per_hour = rate_limit_per_hour
        # How long a script run waits for a free slot of its GPU type before giving up.
        self.wait_s = wait_s
        # Carried in script runs' dispatch keys; read from the database when not given.
        self._installation = installation

    async def run(
        self,
        user: Submitter,
        gpu: str,
        request: RunRequest,
        launchers: Mapping[str, Launcher],
        *,
        on_state: StateCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> RunResult:
        """Runs a script (`/run`) once the user is under their hourly limit and the GPU type
        has a free slot: scripts and queued jobs share its concurrency. `on_state` hears
        "waiting" (for a slot) and "running"."""
        gpu_type = self.registry.get(gpu)
        script_launch.launcher_for(self.registry, launchers, gpu)  # refused before it counts
        script_id = await self._script_slot(user, gpu_type, on_state)
        async with self._holding_slot(script_id):
            if on_state is not None:
                await on_state("running")
            key = dispatch_key(await self._installation_id(), f"script-{uuid.uuid4().hex}")
            return await script_launch.run_script(
                self.registry, launchers, gpu, request, key=key, on_progress=on_progress
            )

    async def _script_slot(
        self, user: Submitter, gpu: GpuType, on_state: StateCallback | None
    ) -> int:
        """Waits for a free slot of `gpu` (up to `wait_s`); the slot's id."""
        deadline = time.monotonic() + self.wait_s
        waiting = False
        while True:
            script_id = await self._try_script_slot(user, gpu)
            if script_id is not None:
                return script_id
            if on_state is not None and not waiting:
                await on_state("waiting")
            waiting = True
            if time.monotonic() >= deadline:
                raise GpuBusyError(
                    f"all {gpu.max_concurrent} slot(s) of {gpu.name} stayed busy for "
                    f"{human_duration(int(self.wait_s))}; try again later"
                )
            await asyncio.sleep(SCRIPT_SLOT_POLL_S)

    async def _try_script_slot(self, user: Submitter, gpu: GpuType) -> int | None:
        """A free slot's id, or None while all are taken; over the hourly limit, an error."""
        now = self.clock()
        async with self.pool.acquire() as conn, conn.transaction():
            found = await lb_store.upsert_user(conn, user.external_id, user.name)
            await check_may_submit(conn, leaderboard_id=None, user_id=found.id)
            await script_store.lock_user(conn, found.id)
            recent = await script_store.started_since(
                conn, user_id=found.id, since=now - RATE_WINDOW
            )
            check_rate(recent, self.rate_limit_per_hour, now, "script runs per hour")
            return await script_store.take_slot(
                conn,
                user_id=found.id,
                gpu=gpu.name,
                max_active=gpu.max_concurrent,
                lease_s=SCRIPT_LEASE_S,
                started_at=now,
            )

    @contextlib.asynccontextmanager
    async def _holding_slot(self, script_id: int) -> AsyncIterator[None]:
        """Renews the slot's lease while the script runs; frees the slot when it ends."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(SCRIPT_LEASE_S / 3)
                with contextlib.suppress(DatabaseUnavailableError):
                    await script_store.renew_slot(self.pool, script_id, lease_s=SCRIPT_LEASE_S)

        renewing = asyncio.create_task(renew())
        try:
            yield
        finally:
            renewing.cancel()
            # If the database is away, the lease lapses on its own.
            with contextlib.suppress(DatabaseUnavailableError):
                await script_store.release_slot(self.pool, script_id)

    async def _installation_id(self) -> str:
        """Carried in script runs' dispatch keys; read from the database once if not given."""
        if self._installation is None:
            self._installation = await installation_store.installation_id(self.pool)
        return self._installation
