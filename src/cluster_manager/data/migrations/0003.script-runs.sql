-- Quick script runs (`/run`): each holds a slot of its GPU type's concurrency while it runs,
-- counted with the jobs in flight, and the rows left behind count toward a per-user limit.
-- depends: 0002.installation

CREATE TABLE script_runs (
    id               BIGSERIAL PRIMARY KEY,
    user_id          BIGINT NOT NULL REFERENCES users (id),
    gpu              TEXT NOT NULL,
    -- On the service's clock, as submissions' times: the rate limit counts on it.
    started_at       TIMESTAMPTZ NOT NULL,
    -- The slot is held while this lies ahead; its holder renews it, a dead one lets it lapse.
    lease_expires_at TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ
);
CREATE INDEX script_runs_rate_limit ON script_runs (user_id, started_at);
CREATE INDEX script_runs_active ON script_runs (gpu) WHERE finished_at IS NULL;
