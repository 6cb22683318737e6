"""What /metrics read at each scrape before migration 0023's running totals: every ended job,
with its run, counted afresh. The totals' test compares against it; the scrape benchmark
times it as the cost the totals replaced."""

RECOUNT_ENDED = """
    SELECT j.gpu, coalesce(j.launcher, '') AS launcher,
           CASE WHEN j.state = 'finished' THEN coalesce(r.verdict, 'unrecorded')
                WHEN j.dispatched_at IS NOT NULL THEN 'lost'
                WHEN j.launcher IS NOT NULL THEN 'dispatch_error'
                ELSE 'not_dispatched' END AS outcome,
           count(*) AS n
    FROM jobs j LEFT JOIN runs r ON r.job_id = j.id
    WHERE j.state IN ('finished', 'failed')
    GROUP BY 1, 2, 3
"""
