-- The rankings are read as a scan of `rankings_order` in the ranking's own order that stops
-- once it holds the entries asked for (storage/rankings.py). With the submission as the last
-- tie-break the index is that order, so no sort sits on top of the scan, and with the user
-- alongside the scan needs no table row where the visibility map allows (an index-only scan,
-- as for counting the entries ahead of one in `rank_of`).
-- depends: 0021.teams

DROP INDEX rankings_order;
CREATE INDEX rankings_order ON rankings
    (leaderboard_id, gpu, after_deadline, score, submitted_at, submission_id) INCLUDE (user_id);
