"""A leaderboard as a data set, to publish after a competition: its rankings, or every
submission with code, runs and scores. Read in pages, so a season never sits in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from cluster_manager.service.context import Context
from cluster_manager.service.leaderboards import find_leaderboard
from cluster_manager.storage import exports as export_store
from cluster_manager.storage import runs as run_store

PAGE = 1000
Row = dict[str, Any]


class Exports:
    """A leaderboard as a data set: its rankings, or every submission."""

    def __init__(self, ctx: Context) -> None:
        self.pool = ctx.pool

    async def rankings(self, name: str) -> AsyncIterator[list[Row]]:
        """Pages of ranking rows, GPU by GPU, as the rankings show them (banned users and
        invalidated submissions left out)."""
        board = await find_leaderboard(self.pool, name)
        for gpu in board.gpus:
            offset = 0
            while True:
                entries = await run_store.ranking(
                    self.pool, leaderboard_id=board.id, gpu=gpu, limit=PAGE, offset=offset
                )
                if not entries:
                    break
                yield [
                    {
                        "leaderboard": board.name,
                        "gpu": gpu,
                        "rank": e.rank,
                        "user_id": e.user,
                        "team": e.team,  # the entry is this team's, held by `user_id`
                        "score_s": e.score,
                        "submission_id": e.submission_id,
                        "submitted_at": e.submitted_at.isoformat(),
                    }
                    for e in entries
                ]
                offset += len(entries)

    async def submissions(self, name: str) -> AsyncIterator[list[Row]]:
        """Pages of every submission to the leaderboard, with code and runs."""
        board = await find_leaderboard(self.pool, name)
        after = 0
        while page := await export_store.submissions_page(
            self.pool, leaderboard_id=board.id, after_id=after, limit=PAGE
        ):
            yield [{"leaderboard": board.name, **row} for row in page]
            after = page[-1]["submission_id"]
