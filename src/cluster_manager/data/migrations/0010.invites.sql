-- Invite-only leaderboards: a closed leaderboard is listed to and takes submissions from its
-- members only; a user becomes a member by redeeming an invite code an admin minted. Each
-- code may be redeemed `max_uses` times (by different users).
-- depends: 0009.admin-controls

ALTER TABLE leaderboards ADD COLUMN closed BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE invites (
    code           TEXT PRIMARY KEY,
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    max_uses       INTEGER NOT NULL CHECK (max_uses > 0),
    uses           INTEGER NOT NULL DEFAULT 0 CHECK (uses <= max_uses),
    created_by     TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL,
    revoked_at     TIMESTAMPTZ
);
CREATE INDEX invites_board ON invites (leaderboard_id, created_at);

CREATE TABLE leaderboard_members (
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    invite_code    TEXT REFERENCES invites (code) ON DELETE SET NULL,
    joined_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (leaderboard_id, user_id)
);
