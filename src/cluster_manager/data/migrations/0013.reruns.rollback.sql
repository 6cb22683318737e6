DROP INDEX jobs_queued;
CREATE INDEX jobs_queued ON jobs (gpu, id) WHERE state = 'queued';
DELETE FROM jobs WHERE rerun > 0;
ALTER TABLE jobs DROP CONSTRAINT jobs_one_per_generation;
ALTER TABLE jobs ADD CONSTRAINT jobs_submission_id_gpu_mode_secret_key
    UNIQUE (submission_id, gpu, mode, secret);
ALTER TABLE jobs DROP COLUMN priority, DROP COLUMN rerun;
