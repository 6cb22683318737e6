-- Runs after a leaderboard's deadline: taken while its organiser allows them (on by default),
-- who set that last and when; each submission says whether it came after the deadline, as
-- it stood then; their ranked pairs rank on their own (`rankings.after_deadline`), never in
-- the competition's ranking, its history or its announcements.
-- depends: 0019.channel-policy

ALTER TABLE leaderboards
    ADD COLUMN after_deadline_runs BOOLEAN NOT NULL DEFAULT true,
    ADD COLUMN after_deadline_runs_set_by TEXT,
    ADD COLUMN after_deadline_runs_set_at TIMESTAMPTZ;

ALTER TABLE submissions ADD COLUMN after_deadline BOOLEAN NOT NULL DEFAULT false;

ALTER TABLE rankings ADD COLUMN after_deadline BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE rankings DROP CONSTRAINT rankings_pkey;
ALTER TABLE rankings ADD PRIMARY KEY (leaderboard_id, gpu, user_id, after_deadline);
DROP INDEX rankings_order;
CREATE INDEX rankings_order ON rankings (leaderboard_id, gpu, after_deadline, score, submitted_at);
