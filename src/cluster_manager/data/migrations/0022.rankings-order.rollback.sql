-- The index as migration 0020 left it.

DROP INDEX rankings_order;
CREATE INDEX rankings_order ON rankings (leaderboard_id, gpu, after_deadline, score, submitted_at);
