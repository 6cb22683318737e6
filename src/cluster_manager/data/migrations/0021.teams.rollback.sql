-- Every team, its members and its invite codes are dropped; rankings were per user all along.

DROP TABLE team_invites;
DROP TABLE team_members;
DROP TABLE teams;

ALTER TABLE leaderboards
    DROP COLUMN team_quotas,
    DROP COLUMN team_size;
