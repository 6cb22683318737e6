-- Back to ranking a pair with its public run's score: a row (or history point) that holds
-- its pair's secret score, worse than the public one, takes the public score again. Rows
-- dropped for a secret run without a score are not restored (a rerank of the user does).

UPDATE rankings k SET score = p.public_score
FROM (
    SELECT DISTINCT ON (r.submission_id, r.gpu) r.submission_id, r.gpu,
           max(r.score) FILTER (WHERE NOT r.secret) AS public_score,
           max(r.score) FILTER (WHERE r.secret) AS secret_score
    FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE r.mode = 'leaderboard'
    GROUP BY r.submission_id, r.gpu, j.rerun
    HAVING count(*) = 2
    ORDER BY r.submission_id, r.gpu, j.rerun DESC
) p
WHERE k.submission_id = p.submission_id AND k.gpu = p.gpu AND k.score = p.secret_score
      AND p.public_score < k.score;

UPDATE ranking_events e SET score = p.public_score
FROM (
    SELECT DISTINCT ON (r.submission_id, r.gpu) r.submission_id, r.gpu,
           max(r.score) FILTER (WHERE NOT r.secret) AS public_score,
           max(r.score) FILTER (WHERE r.secret) AS secret_score
    FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE r.mode = 'leaderboard'
    GROUP BY r.submission_id, r.gpu, j.rerun
    HAVING count(*) = 2
    ORDER BY r.submission_id, r.gpu, j.rerun DESC
) p
WHERE e.submission_id = p.submission_id AND e.gpu = p.gpu AND e.score = p.secret_score
      AND p.public_score < e.score;

UPDATE leaderboards SET history_version = history_version + 1;
