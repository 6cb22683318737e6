-- API tokens: how a user of the HTTP API (popcorn-cli, our CLI as a client, scripts) says who
-- they are. Only a hash is stored: a database dump gives nobody a working token.
-- depends: 0004.drop-submission-status

CREATE TABLE api_tokens (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- SHA-256 of the token; a token holds 256 random bits, so no slow hash is needed.
    token_hash   BYTEA NOT NULL UNIQUE,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
-- One live token per user: issuing a new one revokes the old one in the same transaction.
CREATE UNIQUE INDEX api_tokens_one_live_per_user ON api_tokens (user_id) WHERE revoked_at IS NULL;
