ALTER TABLE submissions DROP COLUMN profile_options;
