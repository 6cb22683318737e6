"""Submissions and their code (stored once per distinct file)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.storage.database import Connection, Executor


@dataclass(frozen=True)
class StoredSubmission:
    id: int
    leaderboard_id: int
    leaderboard: str
    user_id: int
    user: str
    file_name: str
    code: str
    mode: Mode
    submitted_at: datetime
    profile_benchmark: int | None = None  # profile mode: only this benchmark case
    profile: ProfileOptions | None = None  # profile mode: Nsight Compute's filter; None: default
    invalidated: str | None = None  # why an organiser took it out of the rankings, and who
    after_deadline: bool = False  # made after its leaderboard's deadline: ranked on its own


async def insert_submission(
    conn: Connection,
    *,
    leaderboard_id: int,
    user_id: int,
    file_name: str,
    code: str,
    mode: Mode,
    submitted_at: datetime,
    profile_benchmark: int | None = None,
    profile: ProfileOptions | None = None,
    after_deadline: bool = False,
) -> tuple[int, datetime]:
    digest = hashlib.sha256(code.encode("utf-8")).hexdigest()
    # DO UPDATE (a no-op) rather than DO NOTHING so RETURNING yields the existing row's id.
    code_id = await conn.fetchval(
        """
        INSERT INTO code_files (sha256, code) VALUES ($1, $2)
        ON CONFLICT (sha256) DO UPDATE SET sha256 = EXCLUDED.sha256
        RETURNING id
        """,
        digest,
        code,
    )
    row = await conn.fetchrow(
        """
        INSERT INTO submissions (leaderboard_id, user_id, file_name, code_id, mode, submitted_at,
                                 profile_benchmark, profile_options, after_deadline)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        RETURNING id, submitted_at
        """,
        leaderboard_id,
        user_id,
        file_name,
        code_id,
        mode.value,
        submitted_at,
        profile_benchmark,
        None if profile is None else profile.to_json(),
        after_deadline,
    )
    assert row is not None
    return int(row["id"]), row["submitted_at"]


async def get_submission(db: Executor, submission_id: int) -> StoredSubmission | None:
    row = await db.fetchrow(
        """
        SELECT s.id, s.leaderboard_id, l.name AS leaderboard, s.user_id,
               u.external_id AS user_name, s.file_name, c.code, s.mode, s.submitted_at,
               s.profile_benchmark, s.profile_options, s.invalidation_reason, s.invalidated_by,
               s.after_deadline
        FROM submissions s
        JOIN leaderboards l ON l.id = s.leaderboard_id
        JOIN users u ON u.id = s.user_id
        JOIN code_files c ON c.id = s.code_id
        WHERE s.id = $1
        """,
        submission_id,
    )
    if row is None:
        return None
    return StoredSubmission(
        id=row["id"],
        leaderboard_id=row["leaderboard_id"],
        leaderboard=row["leaderboard"],
        user_id=row["user_id"],
        user=row["user_name"],
        file_name=row["file_name"],
        code=row["code"],
        mode=Mode(row["mode"]),
        submitted_at=row["submitted_at"],
        profile_benchmark=row["profile_benchmark"],
        profile=None
        if row["profile_options"] is None
        else ProfileOptions.from_json(row["profile_options"]),
        invalidated=None
        if row["invalidation_reason"] is None
        else f"{row['invalidation_reason']} ({row['invalidated_by']})",
        after_deadline=row["after_deadline"],
    )


async def submissions_of_user(
    db: Executor, *, user_id: int, leaderboard_id: int | None, limit: int
) -> list[int]:
    """Ids of a user's submissions (on one leaderboard, or all), newest first."""
    rows = await db.fetch(
        """
        SELECT id FROM submissions
        WHERE user_id = $1 AND ($2::bigint IS NULL OR leaderboard_id = $2)
        ORDER BY submitted_at DESC, id DESC
        LIMIT $3
        """,
        user_id,
        leaderboard_id,
        limit,
    )
    return [r["id"] for r in rows]


async def delete_submission(conn: Connection, submission_id: int) -> bool:
    """Deletes a submission with its jobs, runs and ranking rows (cascades)."""
    result = await conn.execute("DELETE FROM submissions WHERE id = $1", submission_id)
    return bool(result.endswith(" 1"))


async def set_invalidated(
    db: Executor, submission_id: int, reason: str | None, by: str | None, now: datetime | None
) -> None:
    """Marks a submission invalid (with why and who), or valid again with Nones."""
    await db.execute(
        "UPDATE submissions SET invalidated_at = $2, invalidated_by = $3, invalidation_reason = $4"
        " WHERE id = $1",
        submission_id,
        now,
        by,
        reason,
    )
