-- Browser sessions of the web pages: signing in with an API token gives a random session id
-- in a cookie; only its hash is stored, and the token itself never reaches the browser's
-- storage. A session ends with its token (revoked or replaced) or at its expiry.
-- depends: 0007.ranking-events

CREATE TABLE web_sessions (
    id_hash          BYTEA PRIMARY KEY,
    -- the token signed in with; NULL for the admin token, whose hash is kept instead so that
    -- changing the admin token ends its sessions
    token_id         BIGINT REFERENCES api_tokens (id) ON DELETE CASCADE,
    admin_token_hash BYTEA,
    created_at       TIMESTAMPTZ NOT NULL,
    expires_at       TIMESTAMPTZ NOT NULL,
    CHECK ((token_id IS NULL) <> (admin_token_hash IS NULL))
);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);
-- Whose ranked submission this is: the pages open a ranked submission's code after the
-- deadline, and deleting a submission cascades here.
CREATE INDEX rankings_submission ON rankings (submission_id);
