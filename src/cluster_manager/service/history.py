"""A user's own submissions: listing them, reading one, deleting one. Someone else's
submission is reported as not found, so ids cannot be probed."""

from __future__ import annotations

from cluster_manager.core.models import Mode
from cluster_manager.service.context import Context
from cluster_manager.service.errors import NotFoundError, StillRunningError
from cluster_manager.service.leaderboards import find_leaderboard, visible_or_none
from cluster_manager.service.receipts import SubmissionReport, Submitter
from cluster_manager.service.rules import check_standings_open
from cluster_manager.service.submissions import load_report
from cluster_manager.storage import history as history_store
from cluster_manager.storage import leaderboards as lb_store
from cluster_manager.storage import runs as run_store
from cluster_manager.storage import submissions as sub_store

MAX_LISTED = 100


class History:
    """A user's own submissions: listing, reading, deleting."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool
        self.clock = ctx.clock
        self.allow_unsandboxed_ranking = ctx.allow_unsandboxed_ranking

    async def submissions(
        self, user: Submitter, *, leaderboard: str | None = None, limit: int = 20
    ) -> list[SubmissionReport]:
        """The user's submissions, newest first (at most `MAX_LISTED`)."""
        board_id = (
            None if leaderboard is None else (await find_leaderboard(self.pool, leaderboard)).id
        )
        found = await lb_store.get_user(self.pool, user.external_id)
        if found is None:
            return []
        ids = await sub_store.submissions_of_user(
            self.pool, user_id=found.id, leaderboard_id=board_id, limit=min(limit, MAX_LISTED)
        )
        return [await load_report(self.pool, i) for i in ids]

    async def own_report(
        self, submission_id: int, user: Submitter | None, *, admin: bool = False
    ) -> SubmissionReport:
        """The submission's report, for its author (secret runs redacted) or an admin (in
        full) only."""
        report = await load_report(self.pool, submission_id, admin=admin)
        if not admin and (user is None or report.submission.user != user.external_id):
            raise NotFoundError(f"there is no submission {submission_id}")
        return report

    async def visible_report(
        self, submission_id: int, user: Submitter | None, *, admin: bool = False
    ) -> SubmissionReport:
        """`own_report`, or for anyone who may see its leaderboard a ranked submission (its
        code included) once the leaderboard has ended, as rankings are opened up after a
        competition; never before."""
        report = await load_report(self.pool, submission_id, admin=admin)
        if admin or (user is not None and report.submission.user == user.external_id):
            return report
        board = await visible_or_none(self.pool, report.submission.leaderboard, user, False)
        if (
            board is None
            or board.is_open(self.clock())
            or not await run_store.is_ranked(self.pool, submission_id)
        ):
            raise NotFoundError(f"there is no submission {submission_id}")
        return report

    async def delete(
        self, submission_id: int, user: Submitter | None, *, admin: bool = False
    ) -> None:
        """Deletes a finished submission of the user's, and ranks them again without it."""
        report = await self.own_report(submission_id, user, admin=admin)
        if not report.done:
            raise StillRunningError(
                f"submission {submission_id} is still queued or running: delete it once done"
            )
        stored = report.submission
        if not admin and stored.mode is Mode.LEADERBOARD and not stored.after_deadline:
            # A ranked entry of the competition is part of its final standings once it ends.
            board = await find_leaderboard(self.pool, stored.leaderboard)
            check_standings_open(board, self.clock(), "delete a ranked submission")
        async with self.pool.acquire() as conn, conn.transaction():
            await sub_store.delete_submission(conn, submission_id)
            await history_store.bump_history(conn, stored.leaderboard_id)  # its points go too
            await run_store.rerank_user(
                conn,
                leaderboard_id=stored.leaderboard_id,
                user_id=stored.user_id,
                allow_unsandboxed=self.allow_unsandboxed_ranking,
            )
