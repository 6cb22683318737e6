-- A ranked pair ranks with the worse of its two scores, its public run's and its secret
-- re-run's (core/ranked_pairs.py), no longer with its public run's alone. A ranking row, and
-- a point of the charts' history, that holds its pair's public score takes the secret score
-- where that is worse; one whose secret run has no score ranks no more. The pair is the
-- latest generation of a submission's ranked runs on a GPU with both runs stored, as
-- storage/runs.py's rerank_user reads it. Each user keeps the submission that was ranked.
-- depends: 0015.profile-options

UPDATE rankings k SET score = p.secret_score
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
WHERE k.submission_id = p.submission_id AND k.gpu = p.gpu AND k.score = p.public_score
      AND p.secret_score > k.score;

UPDATE ranking_events e SET score = p.secret_score
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
WHERE e.submission_id = p.submission_id AND e.gpu = p.gpu AND e.score = p.public_score
      AND p.secret_score > e.score;

DELETE FROM rankings k
USING (
    SELECT DISTINCT ON (r.submission_id, r.gpu) r.submission_id, r.gpu,
           max(r.score) FILTER (WHERE r.secret) AS secret_score
    FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE r.mode = 'leaderboard'
    GROUP BY r.submission_id, r.gpu, j.rerun
    HAVING count(*) = 2
    ORDER BY r.submission_id, r.gpu, j.rerun DESC
) p
WHERE k.submission_id = p.submission_id AND k.gpu = p.gpu AND p.secret_score IS NULL;

-- Cached charts are drawn again from the history as it now reads.
UPDATE leaderboards SET history_version = history_version + 1;
