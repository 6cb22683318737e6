-- Teams as migration 0021 made them: past memberships and disbanded teams are dropped.

DELETE FROM team_members WHERE left_at IS NOT NULL;
DELETE FROM teams WHERE disbanded_at IS NOT NULL;

DROP INDEX team_members_user;
DROP INDEX team_members_current;
ALTER TABLE team_members
    DROP CONSTRAINT team_members_left_after_joining,
    DROP COLUMN left_at,
    DROP COLUMN id;
ALTER TABLE team_members ADD CONSTRAINT team_members_pkey PRIMARY KEY (leaderboard_id, user_id);

DROP INDEX teams_live_name;
ALTER TABLE teams DROP COLUMN disbanded_at;
ALTER TABLE teams ADD CONSTRAINT teams_leaderboard_id_name_key UNIQUE (leaderboard_id, name);
