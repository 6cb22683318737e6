-- Every leaderboard's channel sees a ranked submission's verdict and places again.

ALTER TABLE leaderboards
    DROP COLUMN channel_policy_set_at,
    DROP COLUMN channel_policy_set_by,
    DROP COLUMN channel_policy;
