"""What a leaderboard's data set is made of, read in pages (a season holds hundreds of
thousands of submissions): every submission with its code and its runs' outcomes."""

from __future__ import annotations

import json
from typing import Any

from cluster_manager.storage.database import Executor


async def submissions_page(
    db: Executor, *, leaderboard_id: int, after_id: int, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` submissions with ids above `after_id`, in id order; each with its runs
    (gpu, secret, passed, verdict, score in seconds; a secret run's details are never kept)."""
    rows = await db.fetch(
        """
        SELECT s.id AS submission_id, u.external_id AS user_id, u.name AS user_name,
               s.file_name, s.mode, s.submitted_at, s.invalidation_reason, c.code,
               coalesce(
                   (SELECT json_agg(json_build_object(
                        'gpu', r.gpu, 'secret', r.secret, 'passed', r.passed,
                        'verdict', r.verdict, 'score', r.score) ORDER BY r.gpu, r.secret)
                    FROM runs r WHERE r.submission_id = s.id),
                   '[]') AS runs
        FROM submissions s
        JOIN users u ON u.id = s.user_id
        JOIN code_files c ON c.id = s.code_id
        WHERE s.leaderboard_id = $1 AND s.id > $2
        ORDER BY s.id
        LIMIT $3
        """,
        leaderboard_id,
        after_id,
        limit,
    )
    return [
        {
            "submission_id": r["submission_id"],
            "user_id": r["user_id"],
            "user_name": r["user_name"],
            "file_name": r["file_name"],
            "mode": r["mode"],
            "submitted_at": r["submitted_at"].isoformat(),
            "invalidated": r["invalidation_reason"],
            "code": r["code"],
            "runs": json.loads(r["runs"]) if isinstance(r["runs"], str) else r["runs"],
        }
        for r in rows
    ]
