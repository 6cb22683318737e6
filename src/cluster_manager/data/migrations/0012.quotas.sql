-- Per-user quota overrides an admin sets (a trusted team's higher quota, a noisy account's
-- lower one); NULL keeps the deployment's default for that quota.
-- depends: 0011.announcements

CREATE TABLE user_quotas (
    user_id         BIGINT PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    per_hour        INTEGER CHECK (per_hour > 0),  -- per leaderboard, test/benchmark and ranked
    daily           INTEGER CHECK (daily > 0),  -- all leaderboards
    set_by          TEXT NOT NULL,
    set_at          TIMESTAMPTZ NOT NULL
);
-- The quotas count a user's recent submissions across leaderboards, and per GPU type.
CREATE INDEX submissions_user_time ON submissions (user_id, submitted_at);
