-- Each time a user's best ranked score on a leaderboard and GPU improves: the history the
-- charts draw (the fastest over time, each top user's line). Written with the ranking, in
-- the transaction that ranks the pair, so it holds exactly what the ranking accepted.
-- depends: 0006.profile-benchmark

CREATE TABLE ranking_events (
    id             BIGSERIAL PRIMARY KEY,
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    gpu            TEXT NOT NULL,
    user_id        BIGINT NOT NULL REFERENCES users (id),
    submission_id  BIGINT NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
    score          DOUBLE PRECISION NOT NULL,
    ranked_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX ranking_events_board ON ranking_events (leaderboard_id, gpu, id);
