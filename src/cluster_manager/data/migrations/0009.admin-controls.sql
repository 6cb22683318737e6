-- What organisers switch on and off: submissions paused (everywhere, or on one leaderboard),
-- users banned, submissions invalidated. A banned user's rankings are hidden, not deleted:
-- unbanning shows them.
-- depends: 0008.web-sessions

CREATE TABLE submission_pauses (
    id             BIGSERIAL PRIMARY KEY,
    -- NULL: every leaderboard
    leaderboard_id BIGINT REFERENCES leaderboards (id) ON DELETE CASCADE,
    reason         TEXT NOT NULL,
    paused_by      TEXT NOT NULL,
    paused_at      TIMESTAMPTZ NOT NULL
);
-- At most one pause per scope (the global one included).
CREATE UNIQUE INDEX submission_pauses_scope ON submission_pauses (coalesce(leaderboard_id, 0));

CREATE TABLE user_bans (
    user_id   BIGINT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    reason    TEXT NOT NULL,
    banned_by TEXT NOT NULL,
    banned_at TIMESTAMPTZ NOT NULL
);

-- An invalidated submission (a cheat, a result from a broken task) stays stored with who
-- invalidated it and why, out of every ranking and chart; restoring it brings it back.
ALTER TABLE submissions
    ADD COLUMN invalidated_at      TIMESTAMPTZ,
    ADD COLUMN invalidated_by      TEXT,
    ADD COLUMN invalidation_reason TEXT;
-- Few are ever invalidated: rankings and charts skip them through this small index.
CREATE INDEX submissions_invalidated ON submissions (id) WHERE invalidated_at IS NOT NULL;

-- Changes whenever what a leaderboard's charts show changes (an improvement ranked, a ban, an
-- invalidation, a deletion): what drawn charts are cached by, read in one indexed lookup.
ALTER TABLE leaderboards ADD COLUMN history_version BIGINT NOT NULL DEFAULT 0;
