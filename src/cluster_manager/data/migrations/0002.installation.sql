-- This installation's id, made once with the schema: every dispatch key carries it, so an
-- installation sharing a runner repository with another (staging and production), or a
-- database made anew, never takes another's runs for its own.
-- depends: 0001.initial

CREATE TABLE installation (
    only_row   BOOLEAN PRIMARY KEY DEFAULT true CHECK (only_row),
    id         TEXT NOT NULL CHECK (id ~ '^[a-z0-9]{8,32}$'),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO installation (id) VALUES (left(md5(gen_random_uuid()::text), 16));
