"""Wiring: one database, one pool, the service, the registry and the launchers.

Front ends (CLI, bot) open the app once at start-up and pass its parts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg

from cluster_manager.core.errors import LauncherError
from cluster_manager.core.gpus import DEFAULT_REGISTRY_FILE, GpuRegistry, GpuType, load_registry
from cluster_manager.core.models import Limits
from cluster_manager.launchers.base import Launcher
from cluster_manager.launchers.local import LocalLauncher
from cluster_manager.scheduling.config import SchedulerConfig
from cluster_manager.scheduling.scheduler import Scheduler
from cluster_manager.service import Service, health
from cluster_manager.service.quotas import QuotaPolicy
from cluster_manager.settings import Settings, local_limits
from cluster_manager.storage.database import (
    DatabaseError,
    create_pool,
    database_url,
    embedded_exists,
)
from cluster_manager.storage.installation import installation_id
from cluster_manager.storage.migrations import apply_migrations, pending_on
from cluster_manager.storage.singletons import held_alone

if TYPE_CHECKING:
    from cluster_manager.storage.backup import Backup, Restored


@dataclass
class App:
    settings: Settings
    database_url: str
    embedded: bool
    pool: asyncpg.Pool
    registry: GpuRegistry
    launchers: dict[str, Launcher]
    service: Service
    # This database's installation id (storage.installation): in every dispatch key.
    installation: str | None = None
    # The embedded database was made by this process (it held nothing before).
    new_database: bool = False

    @property
    def served_gpus(self) -> list[GpuType]:
        """GPU types this process has a launcher for."""
        return self.registry.served_by(self.launchers)

    def alone(self, role: str, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The block runs as the only `role` process for `key` among every process on this
        database, or raises naming the one that runs (storage.singletons)."""
        return held_alone(self.pool, role, key)

    def local_limits(self) -> Limits:
        """Limits for runs on this machine (each GPU type adds its own)."""
        return local_limits(self.settings)

    async def check_database(self) -> health.DatabaseCheck:
        return await health.check_database(self.pool, self.database_url)

    async def verify_launchers(self) -> list[health.LauncherCheck]:
        """The example's correct submission, in test mode, on every GPU type served here."""
        return await health.verify_launchers(self.launchers, self.served_gpus, self.local_limits())

    def scheduler(
        self,
        config: SchedulerConfig | None = None,
        *,
        submission_ids: set[int] | None = None,
        gpus: set[str] | None = None,
    ) -> Scheduler:
        config = config or SchedulerConfig(
            limits=local_limits(self.settings),
            allow_unsandboxed_ranking=self.settings.allow_unsandboxed_ranking,
            throttle_threshold=self.settings.throttle_threshold,
        )
        return Scheduler(
            self.pool,
            self.registry,
            self.launchers,
            config=config,
            submission_ids=submission_ids,
            installation=self.installation,
            gpus=gpus,
        )


def load_settings_registry(settings: Settings) -> GpuRegistry:
    registry = load_registry(settings.gpus_file or DEFAULT_REGISTRY_FILE)
    if settings.local_concurrency is not None:
        registry = registry.with_concurrency("local", settings.local_concurrency)
    return registry


def build_launchers(settings: Settings) -> dict[str, Launcher]:
    """The launchers this process can drive: local always, the others when configured."""
    keep_s = settings.keep_run_folders_hours * 3600
    launchers: dict[str, Launcher] = {
        "local": LocalLauncher(settings.data_dir / "runs", keep_s=keep_s)
    }
    if settings.github_repo and settings.github_tokens:
        from cluster_manager.launchers.github import GitHubLauncher

        launchers["github"] = GitHubLauncher(
            settings.github_repo,
            settings.github_tokens,
            base_url=settings.github_api_url,
            ref=settings.github_ref,
            poll_interval=settings.github_poll_interval_s,
            payload_key=settings.payload_key,
        )
    if settings.slurm_dir:
        from cluster_manager.launchers.slurm import SlurmLauncher

        launchers["slurm"] = SlurmLauncher(
            settings.slurm_dir, python=settings.slurm_python or sys.executable
        )
    if settings.modal_app:
        from cluster_manager.launchers.modal import ModalLauncher

        launchers["modal"] = ModalLauncher(
            settings.modal_app, state_dir=settings.data_dir / "modal-calls"
        )
    return launchers


async def migrate_database(settings: Settings) -> list[str]:
    """Applies pending migrations to the settings' database (or the embedded one); returns
    their names."""
    async with database_url(settings.database_url, settings.data_dir) as (url, _):
        return await asyncio.to_thread(apply_migrations, url)


async def backup_database(settings: Settings, target: Path, *, pg_bin: Path | None) -> Backup:
    """Writes the settings' database (or the embedded one) to the file `target`."""
    from cluster_manager.storage.backup import back_up  # here: psycopg is slow to import

    async with database_url(settings.database_url, settings.data_dir) as (url, _):
        return await asyncio.to_thread(back_up, url, target, pg_bin=pg_bin)


async def restore_database(
    settings: Settings,
    source: Path,
    *,
    replace: bool,
    confirm: Callable[[str], bool],
    pg_bin: Path | None,
) -> Restored:
    """Restores the backup `source` into the settings' database (or the embedded one) and
    migrates it (storage.backup.restore)."""
    from cluster_manager.storage.backup import restore

    async with database_url(settings.database_url, settings.data_dir) as (url, _):
        return await asyncio.to_thread(
            restore, url, source, replace=replace, confirm=confirm, pg_bin=pg_bin
        )


@contextlib.asynccontextmanager
async def open_app(settings: Settings) -> AsyncIterator[App]:
    """Connects (starting the embedded Postgres when no DATABASE_URL is set) and checks the
    schema: the embedded database is migrated on the spot, an external one must be migrated
    explicitly with `cluster-manager db migrate`."""
    new_database = not settings.database_url and not embedded_exists(settings.data_dir)
    async with database_url(settings.database_url, settings.data_dir) as (url, embedded):
        if embedded:
            await asyncio.to_thread(apply_migrations, url)
        pool = await create_pool(url)
        if pending := await pending_on(pool):
            await pool.close()
            raise DatabaseError(
                f"the database needs migrations {', '.join(pending)}: "
                "run `cluster-manager db migrate`"
            )
        launchers: dict[str, Launcher] = {}
        try:
            registry = load_settings_registry(settings)
            installation = await installation_id(pool)
            launchers.update(build_launchers(settings))
            yield App(
                settings=settings,
                database_url=url,
                embedded=embedded,
                pool=pool,
                registry=registry,
                launchers=launchers,
                service=Service(
                    pool,
                    registry,
                    quotas=QuotaPolicy(
                        per_hour=settings.rate_limit_per_hour,
                        ranked_per_hour=settings.ranked_rate_limit_per_hour,
                        daily=settings.daily_quota,
                        new_account_days=settings.new_account_days,
                        new_account_daily=settings.new_account_daily_quota,
                    ),
                    script_rate_limit_per_hour=settings.script_rate_limit_per_hour,
                    installation=installation,
                    allow_unsandboxed_ranking=settings.allow_unsandboxed_ranking,
                    unserved_gpus=registry.unserved_by(launchers),
                ),
                installation=installation,
                new_database=new_database,
            )
        finally:
            for launcher in launchers.values():
                with contextlib.suppress(LauncherError):
                    await launcher.close()
            await pool.close()
