ALTER TABLE submissions
    ADD COLUMN status TEXT NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'running', 'done', 'failed'));
