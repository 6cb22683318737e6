-- A submission's status is derived from its jobs whenever it is asked for; a stored copy was
-- a second source that nothing read and that a crash between two writes could leave stale.
-- depends: 0003.script-runs

ALTER TABLE submissions DROP COLUMN status;
