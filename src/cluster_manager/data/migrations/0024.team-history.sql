-- Teams keep their history: a member who leaves gets `left_at` and a team left empty gets
-- `disbanded_at`, where both rows were deleted. The competition's ranking reads the teams as
-- they stood at the leaderboard's deadline (storage/rankings.py), so a team made, joined,
-- left or disbanded after the deadline leaves the final standings, their placements and their
-- export as they were; the ranking of the runs after the deadline reads the teams of now.
-- A user holds one membership at a time per leaderboard; a team's name is unique, whatever
-- its case, among the teams not disbanded.
-- depends: 0023.ended-job-totals

ALTER TABLE teams ADD COLUMN disbanded_at TIMESTAMPTZ;
ALTER TABLE teams DROP CONSTRAINT teams_leaderboard_id_name_key;
CREATE UNIQUE INDEX teams_live_name ON teams (leaderboard_id, lower(name))
    WHERE disbanded_at IS NULL;

ALTER TABLE team_members DROP CONSTRAINT team_members_pkey;
ALTER TABLE team_members
    ADD COLUMN id BIGSERIAL PRIMARY KEY,
    ADD COLUMN left_at TIMESTAMPTZ,
    ADD CONSTRAINT team_members_left_after_joining CHECK (left_at >= joined_at);
CREATE UNIQUE INDEX team_members_current ON team_members (leaderboard_id, user_id)
    WHERE left_at IS NULL;
-- Whose team a ranking row was in at a time: the user's memberships by when they began.
CREATE INDEX team_members_user ON team_members (leaderboard_id, user_id, joined_at);
