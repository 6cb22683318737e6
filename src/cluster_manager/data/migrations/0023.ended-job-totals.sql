-- /metrics' job counters as running totals: the transaction that ends a job adds it to its
-- row here (storage/ended_totals.py), so a scrape reads a few rows whatever the history
-- (storage/metrics.py says why). A job's row is never taken back: deleting a submission leaves
-- its jobs counted, as a Prometheus counter must.
-- Filled here from the jobs that ended before, as storage/metrics.py counted them then.
-- depends: 0022.rankings-order

-- Ended jobs by GPU type, launcher ('': none recorded) and outcome (the run's verdict, or how
-- a failed job stopped: lost, dispatch_error, not_dispatched).
CREATE TABLE ended_job_totals (
    gpu text NOT NULL,
    launcher text NOT NULL,
    outcome text NOT NULL,
    jobs bigint NOT NULL,
    PRIMARY KEY (gpu, launcher, outcome)
);

-- Finished jobs' run time (dispatch to the recorded result), by GPU type and the histogram
-- bucket it falls in: `le` is the smallest bound (seconds) at or above the run's time,
-- infinity above the last. The time is summed in microseconds, exactly.
CREATE TABLE run_seconds_totals (
    gpu text NOT NULL,
    le double precision NOT NULL,
    runs bigint NOT NULL,
    total_us bigint NOT NULL,
    PRIMARY KEY (gpu, le)
);

INSERT INTO ended_job_totals (gpu, launcher, outcome, jobs)
SELECT j.gpu, coalesce(j.launcher, ''),
       CASE WHEN j.state = 'finished' THEN coalesce(r.verdict, 'unrecorded')
            WHEN j.dispatched_at IS NOT NULL THEN 'lost'
            WHEN j.launcher IS NOT NULL THEN 'dispatch_error'
            ELSE 'not_dispatched' END,
       count(*)
FROM jobs j LEFT JOIN runs r ON r.job_id = j.id
WHERE j.state IN ('finished', 'failed')
GROUP BY 1, 2, 3;

INSERT INTO run_seconds_totals (gpu, le, runs, total_us)
SELECT gpu,
       coalesce((SELECT min(b) FROM unnest(ARRAY[
                     1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600
                 ]::float8[]) AS b
                 WHERE b * 1000000 >= us), 'Infinity'),
       count(*), sum(us)
FROM (
    SELECT gpu, greatest(extract(epoch FROM finished_at - dispatched_at) * 1000000, 0)::bigint AS us
    FROM jobs
    WHERE state = 'finished' AND dispatched_at IS NOT NULL AND finished_at IS NOT NULL
) finished
GROUP BY 1, 2;
