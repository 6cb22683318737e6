"""Live job events: what a front end shows while a submission runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Collection

import asyncpg

from cluster_manager.core.records import Job, JobEvent
from cluster_manager.service.context import Context
from cluster_manager.service.errors import NotFoundError
from cluster_manager.service.event_hub import EventHub
from cluster_manager.service.receipts import TERMINAL_EVENTS, TERMINAL_STATES
from cluster_manager.service.rules import redact_event
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import queue_order
from cluster_manager.storage import runs as run_store
from cluster_manager.storage.database import Executor

# How long a watch waits for a notification before it reads the jobs' state again.
RECHECK_S = 5


class LiveEvents:
    """Live job events: what a front end shows while a submission runs."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        # Every watch of this process shares its one listening connection.
        self.event_hub = EventHub(ctx.pool)

    async def watch(self, *submission_ids: int) -> AsyncIterator[JobEvent]:
        """Live transitions of these submissions' jobs, from their current state until all
        are done, jobs queued meanwhile included; a secret job's as its author may see them
        (`rules.redact_event`). Every watch of a process shares one listening connection
        (`EventHub`)."""
        # Closed with the watch: its subscription ends when a front end stops following.
        async with contextlib.aclosing(self._transitions(set(submission_ids))) as transitions:
            async for event in transitions:
                if (shown := redact_event(event)) is not None:
                    yield shown

    async def _transitions(self, wanted: set[int]) -> AsyncGenerator[JobEvent]:
        async with self.event_hub.subscription(wanted) as events:
            # Subscribed first, then read the state: nothing happens unseen in between.
            snapshots = await _consistent_snapshots(self.pool, wanted)
            if not snapshots:
                raise NotFoundError(f"there is no submission {sorted(wanted)}")
            open_jobs = {e.job_id for e in snapshots if e.state not in TERMINAL_EVENTS}
            for snapshot in snapshots:
                yield snapshot
            while open_jobs:
                try:
                    async with asyncio.timeout(RECHECK_S):
                        event = await events.get()
                except TimeoutError:
                    # A missed notification (connection blip) must not hang us: re-read, and
                    # have the listener back if its connection was lost.
                    await self.event_hub.ensure_listening()
                    for job in await _current_jobs(self.pool, wanted):
                        if job.id in open_jobs and job.state in TERMINAL_STATES:
                            open_jobs.discard(job.id)
                            yield await _snapshot_event(self.pool, job)
                else:
                    if event.state in TERMINAL_EVENTS and event.job_id in open_jobs:
                        open_jobs.discard(event.job_id)
                    yield event
                if not open_jobs:
                    # A result can queue more of the submission's jobs in its transaction (a
                    # throttled ranked pair's retry): those are followed to their end too.
                    for snapshot in await _consistent_snapshots(self.pool, wanted):
                        if snapshot.state not in TERMINAL_EVENTS:
                            open_jobs.add(snapshot.job_id)
                            yield snapshot


async def _current_jobs(db: Executor, submission_ids: Collection[int]) -> list[Job]:
    found = []
    for submission_id in sorted(submission_ids):
        found += await job_store.jobs_of_submission(db, submission_id)
    return found


async def _consistent_snapshots(pool: asyncpg.Pool, wanted: Collection[int]) -> list[JobEvent]:
    """Each job's state with its queue position, read from one snapshot of the database: a
    job claimed between two reads would otherwise show as queued without a position."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        return [await _snapshot_event(conn, job) for job in await _current_jobs(conn, wanted)]


async def _snapshot_event(db: Executor, job: Job) -> JobEvent:
    """The event that describes a job's stored state (for late subscribers)."""
    return JobEvent.of_job(
        job,
        position=await queue_order.queue_position(db, job.id),
        verdict=await run_store.verdict_of_job(db, job.id),
    )
