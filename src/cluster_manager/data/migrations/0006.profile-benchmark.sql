-- A profile submission may ask for one benchmark case only (popcorn-cli's benchmark_index):
-- the scheduler profiles that case instead of all of them.
-- depends: 0005.api-tokens

ALTER TABLE submissions ADD COLUMN profile_benchmark INTEGER CHECK (profile_benchmark >= 0);
