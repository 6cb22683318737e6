"""`within`: a wait with a time limit that never loses a cancel."""

from __future__ import annotations

import asyncio

import pytest

from cluster_manager.core.waits import within


async def test_it_says_whether_the_wait_ended_in_time() -> None:
    done = asyncio.Event()
    done.set()
    assert await within(5, done.wait()) is True
    assert await within(0.01, asyncio.Event().wait()) is False


@pytest.mark.parametrize("turns", range(4))
async def test_a_cancel_meeting_the_result_is_not_lost(turns: int) -> None:
    """The event is set and the waiting task cancelled in the same turns of the loop: the
    task must end cancelled, not go on as if the wait had simply ended (what
    `asyncio.wait_for` does on Python 3.11)."""
    event = asyncio.Event()

    async def waiter() -> None:
        while True:  # as the scheduler's and the painter's loops do
            await within(60, event.wait())
            event.clear()

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)  # the waiter is waiting
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)  # tests may use wait_for; the code under test may not
    assert task.cancelled()
