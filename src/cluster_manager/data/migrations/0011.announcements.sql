-- The top three of each leaderboard and GPU as last announced (or first seen): what the
-- announcer compares the ranking with, so that a change is announced once, by one process,
-- and never again after a restart.
-- depends: 0010.invites

CREATE TABLE announced_leaders (
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    gpu            TEXT NOT NULL,
    leaders        JSONB NOT NULL,  -- the users' external ids, fastest first
    announced_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (leaderboard_id, gpu)
);
