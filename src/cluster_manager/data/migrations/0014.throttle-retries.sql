-- Throttle retries: a ranked run whose GPU throttled is stored but not ranked, and its pair
-- runs once more as a new generation of its jobs. `retry_of` names the generation retried,
-- so a generation is retried at most once and a retry is never retried.
-- depends: 0013.reruns

ALTER TABLE jobs ADD COLUMN retry_of INTEGER;  -- NULL: not a throttle retry
