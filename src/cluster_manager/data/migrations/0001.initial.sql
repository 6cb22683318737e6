-- The community's record: leaderboards, users, submissions, the job queue and run results.
-- depends:

CREATE TABLE users (
    id          BIGSERIAL PRIMARY KEY,
    -- Stable identity from the front end: a Discord user id, or a CLI user name.
    external_id TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE leaderboards (
    id                  BIGSERIAL PRIMARY KEY,
    name                TEXT NOT NULL UNIQUE,
    deadline            TIMESTAMPTZ NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    task                JSONB NOT NULL,
    creator_id          BIGINT REFERENCES users (id) ON DELETE SET NULL,
    secret_seed         BIGINT NOT NULL,
    -- Submissions per user per hour; NULL takes the service's default.
    rate_limit_per_hour INTEGER CHECK (rate_limit_per_hour > 0),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE leaderboard_gpus (
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    gpu            TEXT NOT NULL,
    PRIMARY KEY (leaderboard_id, gpu)
);

CREATE TABLE templates (
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    language       TEXT NOT NULL,
    code           TEXT NOT NULL,
    PRIMARY KEY (leaderboard_id, language)
);

-- Identical files are stored once.
CREATE TABLE code_files (
    id     BIGSERIAL PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,
    code   TEXT NOT NULL
);

CREATE TABLE submissions (
    id             BIGSERIAL PRIMARY KEY,
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL REFERENCES users (id),
    file_name      TEXT NOT NULL,
    code_id        BIGINT NOT NULL REFERENCES code_files (id),
    mode           TEXT NOT NULL CHECK (mode IN ('test', 'benchmark', 'leaderboard', 'profile')),
    submitted_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    status         TEXT NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'running', 'done', 'failed'))
);
CREATE INDEX submissions_rate_limit ON submissions (user_id, leaderboard_id, submitted_at);
CREATE INDEX submissions_leaderboard ON submissions (leaderboard_id);

-- One job per submission x GPU x mode, plus the secret re-run of a ranked submission.
CREATE TABLE jobs (
    id               BIGSERIAL PRIMARY KEY,
    submission_id    BIGINT NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
    gpu              TEXT NOT NULL,
    mode             TEXT NOT NULL CHECK (mode IN ('test', 'benchmark', 'leaderboard', 'profile')),
    secret           BOOLEAN NOT NULL DEFAULT false,
    state            TEXT NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'claimed', 'dispatched', 'finished', 'failed')),
    launcher         TEXT,
    -- The launcher's id for the remote run; known before dispatch so a restart re-attaches.
    external_id      TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    heartbeat_at     TIMESTAMPTZ,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    claimed_at       TIMESTAMPTZ,
    dispatched_at    TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ,
    error            TEXT,
    UNIQUE (submission_id, gpu, mode, secret)
);
CREATE INDEX jobs_queued ON jobs (gpu, id) WHERE state = 'queued';
CREATE INDEX jobs_active ON jobs (gpu) WHERE state IN ('claimed', 'dispatched');
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state IN ('claimed', 'dispatched');
CREATE INDEX jobs_submission ON jobs (submission_id);

-- Exactly one run per job: the UNIQUE job_id is what makes result writes idempotent.
CREATE TABLE runs (
    id             BIGSERIAL PRIMARY KEY,
    job_id         BIGINT NOT NULL UNIQUE REFERENCES jobs (id) ON DELETE CASCADE,
    submission_id  BIGINT NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL REFERENCES users (id),
    gpu            TEXT NOT NULL,
    mode           TEXT NOT NULL,
    secret         BOOLEAN NOT NULL,
    passed         BOOLEAN NOT NULL,
    verdict        TEXT NOT NULL,
    score          DOUBLE PRECISION,
    result         JSONB NOT NULL,
    system         JSONB NOT NULL DEFAULT '{}',
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX runs_personal ON runs (leaderboard_id, user_id, created_at);
CREATE INDEX runs_submission ON runs (submission_id, gpu);

-- Each user's best ranked submission per leaderboard and GPU. Written in the same transaction
-- as the run that completes a (public passed, secret passed) pair, so it never holds a score
-- whose secret run failed or is missing, and reading a ranking is one indexed scan.
CREATE TABLE rankings (
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    gpu            TEXT NOT NULL,
    user_id        BIGINT NOT NULL REFERENCES users (id),
    submission_id  BIGINT NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
    score          DOUBLE PRECISION NOT NULL,
    submitted_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (leaderboard_id, gpu, user_id)
);
CREATE INDEX rankings_order ON rankings (leaderboard_id, gpu, score, submitted_at);
