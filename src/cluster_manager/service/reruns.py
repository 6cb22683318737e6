"""Rerunning ranked submissions after a task fix: each ranking entry's pair (public run and
secret re-run) queued again behind everyone's own jobs; the ranking keeps the old score until
the new pair is in, then takes the new one, better or worse (`storage.runs.record_run`)."""

from __future__ import annotations

from cluster_manager.core.records import Job
from cluster_manager.service.context import Context
from cluster_manager.service.errors import NotFoundError
from cluster_manager.service.leaderboards import find_leaderboard
from cluster_manager.service.submissions import announce
from cluster_manager.storage import jobs as job_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store


class Reruns:
    """Ranked submissions run again after a task fix (their jobs announced as a new
    submission's are)."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool

    async def enqueue(
        self, leaderboard: str, *, user: str | None = None, submission_id: int | None = None
    ) -> list[Job]:
        """Queues the ranked submissions of a leaderboard (or of one user, or one
        submission) again; the new jobs."""
        board = await find_leaderboard(self.pool, leaderboard)
        user_id = None
        if user is not None:
            found = await lb_store.get_user(self.pool, user)
            if found is None:
                raise NotFoundError(f"there is no user {user!r}")
            user_id = found.id
        targets = await run_store.ranked_pairs(
            self.pool, leaderboard_id=board.id, user_id=user_id, submission_id=submission_id
        )
        if not targets:
            raise NotFoundError(f"nothing ranked on {board.name!r} matches: nothing to rerun")
        jobs: list[Job] = []
        async with self.pool.acquire() as conn, conn.transaction():
            for ranked_id, gpu in targets:
                jobs += await job_store.enqueue_rerun(conn, ranked_id, gpu)
        await announce(self.pool, jobs)
        return jobs
