"""Announcing new leaders: when the top three of a leaderboard's GPU change, one message,
at most one per leaderboard and GPU every `min_gap`, never repeated after a restart and
never sent by two processes (the comparison and its record are one locked transaction)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cluster_manager.core.records import RankingEntry
from cluster_manager.service.context import Context
from cluster_manager.storage import announcements as announce_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store

TOP = 3
NEVER = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class LeadersChanged:
    leaderboard: str
    gpu: str
    before: list[str]  # the previous top three's users, fastest first
    now: list[RankingEntry]  # the top three now


class Announcements:
    """New leaders, announced once."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock

    async def leader_changes(self, min_gap: timedelta) -> list[LeadersChanged]:
        """The open leaderboards whose top three changed since last announced (and not
        within `min_gap`), recorded as announced. A leaderboard and GPU seen for the first
        time is recorded without an announcement. Empty while another process announces."""
        now = self.clock()
        changes = []
        async with self.pool.acquire() as conn, conn.transaction():
            if not await announce_store.lock(conn):
                return []
            for summary in await lb_store.list_leaderboards(conn, None, True):
                if summary.deadline <= now:
                    continue
                board = await lb_store.get_leaderboard(conn, summary.name)
                if board is None or board.closed:  # an invite-only round is not announced
                    continue
                for gpu in board.gpus:
                    top = await run_store.ranking(conn, leaderboard_id=board.id, gpu=gpu, limit=TOP)
                    leaders = [e.user for e in top]
                    last = await announce_store.last_announced(conn, board.id, gpu)
                    if last is not None and (last[0] == leaders or now - last[1] < min_gap):
                        continue
                    if last is None:  # first seen: the baseline, which delays no change
                        await announce_store.record(conn, board.id, gpu, leaders, NEVER)
                        continue
                    await announce_store.record(conn, board.id, gpu, leaders, now)
                    changes.append(LeadersChanged(board.name, gpu, last[0], top))
        return changes
