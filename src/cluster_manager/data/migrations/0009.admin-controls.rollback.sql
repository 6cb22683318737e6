ALTER TABLE leaderboards DROP COLUMN history_version;
DROP INDEX submissions_invalidated;
ALTER TABLE submissions
    DROP COLUMN invalidated_at,
    DROP COLUMN invalidated_by,
    DROP COLUMN invalidation_reason;
DROP TABLE user_bans;
DROP TABLE submission_pauses;
