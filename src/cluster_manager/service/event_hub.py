"""One LISTEN connection per process, shared by every watch: following a submission costs a
queue, not a pooled connection, however many clients follow at once (API streams, the bot's
live messages, the CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Collection

import asyncpg

from cluster_manager.core.records import JobEvent
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage.database import listening

log = logging.getLogger(__name__)


class EventHub:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._queues: dict[int, set[asyncio.Queue[JobEvent]]] = defaultdict(set)
        self._subscribers = 0
        self._listener: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def subscription(
        self, submission_ids: Collection[int]
    ) -> AsyncIterator[asyncio.Queue[JobEvent]]:
        """A queue of the submissions' job events, from the moment this is entered (the
        listener is listening by then) until it is left."""
        queue: asyncio.Queue[JobEvent] = asyncio.Queue()
        for submission_id in submission_ids:
            self._queues[submission_id].add(queue)
        self._subscribers += 1
        try:
            await self.ensure_listening()
            yield queue
        finally:
            for submission_id in submission_ids:
                queues = self._queues.get(submission_id)
                if queues is not None:
                    queues.discard(queue)
                    if not queues:
                        del self._queues[submission_id]
            self._subscribers -= 1
            if self._subscribers == 0:
                await self._stop()

    async def ensure_listening(self) -> None:
        """Starts the listener (again, if its connection was lost) and waits until it listens."""
        async with self._lock:
            if self._listener is None or self._listener.done():
                self._ready = asyncio.Event()
                self._listener = asyncio.create_task(self._listen(self._ready), name="events")
            listener, ready = self._listener, self._ready
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({waiting, listener}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if not ready.is_set():  # the listener ended before it listened: say why
            listener.result()

    async def _listen(self, ready: asyncio.Event) -> None:
        lost = asyncio.Event()
        async with listening(self.pool, job_store.EVENTS_CHANNEL, self._dispatch) as conn:
            conn.add_termination_listener(lambda _conn: lost.set())
            ready.set()
            await lost.wait()  # until the connection drops (watches re-read, then restart it)
        log.warning("the job event listener lost its connection")

    def _dispatch(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError, TypeError, KeyError):
            event = JobEvent.from_json(json.loads(payload))
            for queue in self._queues.get(event.submission_id, ()):
                queue.put_nowait(event)

    async def _stop(self) -> None:
        async with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None and not listener.done():
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
