DROP TABLE leaderboard_members;
DROP TABLE invites;
ALTER TABLE leaderboards DROP COLUMN closed;
