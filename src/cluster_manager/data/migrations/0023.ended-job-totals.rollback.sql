-- /metrics counts the ended jobs at each scrape again, from `jobs` and `runs`.

DROP TABLE run_seconds_totals;
DROP TABLE ended_job_totals;
