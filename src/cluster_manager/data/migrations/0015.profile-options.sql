-- A profile submission may narrow what Nsight Compute captures (ProfileOptions: kernel-name
-- regex and its name base, launch skip and count). NULL: the default filter, as for every
-- submission stored before this column.
-- depends: 0014.throttle-retries

ALTER TABLE submissions ADD COLUMN profile_options JSONB;
