"""`Context`: what every part of `Service` shares, handed to each part's constructor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from cluster_manager.core.gpus import GpuRegistry


@dataclass(frozen=True)
class Context:
    pool: asyncpg.Pool
    registry: GpuRegistry
    clock: Callable[[], datetime]
    # As the scheduler's: re-ranking after a deletion or an invalidation follows the same rule.
    allow_unsandboxed_ranking: bool = False
