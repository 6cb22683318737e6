-- Reruns: after a task fix, ranked submissions run again (a new generation of their jobs,
-- queued behind everyone else's). A submission's score is its latest generation whose
-- public run and secret re-run both finished: the old one holds until the new one is in.
-- depends: 0012.quotas

ALTER TABLE jobs
    ADD COLUMN rerun    INTEGER NOT NULL DEFAULT 0,   -- 0: the submission's own run
    ADD COLUMN priority SMALLINT NOT NULL DEFAULT 0;  -- claimed in (priority, id) order
ALTER TABLE jobs DROP CONSTRAINT jobs_submission_id_gpu_mode_secret_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_per_generation
    UNIQUE (submission_id, gpu, mode, secret, rerun);
DROP INDEX jobs_queued;
CREATE INDEX jobs_queued ON jobs (gpu, priority, id) WHERE state = 'queued';
