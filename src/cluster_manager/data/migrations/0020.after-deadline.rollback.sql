-- The rankings of runs after a deadline are dropped (their runs stay); no leaderboard takes
-- runs after its deadline any more.

DELETE FROM rankings WHERE after_deadline;
DROP INDEX rankings_order;
ALTER TABLE rankings DROP CONSTRAINT rankings_pkey;
ALTER TABLE rankings ADD PRIMARY KEY (leaderboard_id, gpu, user_id);
ALTER TABLE rankings DROP COLUMN after_deadline;
CREATE INDEX rankings_order ON rankings (leaderboard_id, gpu, score, submitted_at);

ALTER TABLE submissions DROP COLUMN after_deadline;

ALTER TABLE leaderboards
    DROP COLUMN after_deadline_runs_set_at,
    DROP COLUMN after_deadline_runs_set_by,
    DROP COLUMN after_deadline_runs;
