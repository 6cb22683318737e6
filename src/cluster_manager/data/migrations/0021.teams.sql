-- Teams: users form one per leaderboard (create, invite, join, leave), up to the
-- leaderboard's `team_size` members; a team's members rank as one entry with its best score
-- (read from `rankings`, which stays per user), and with `team_quotas` the leaderboard's
-- hourly quota counts the whole team's submissions. A user is in one team per leaderboard.
-- depends: 0020.after-deadline

ALTER TABLE leaderboards
    ADD COLUMN team_size INTEGER NOT NULL DEFAULT 4 CHECK (team_size BETWEEN 1 AND 100),
    ADD COLUMN team_quotas BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE teams (
    id             BIGSERIAL PRIMARY KEY,
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    created_by     BIGINT NOT NULL REFERENCES users (id),
    created_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (leaderboard_id, name)
);

CREATE TABLE team_members (
    leaderboard_id BIGINT NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL REFERENCES users (id),
    team_id        BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    joined_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (leaderboard_id, user_id)
);
CREATE INDEX team_members_team ON team_members (team_id);

CREATE TABLE team_invites (
    code       TEXT PRIMARY KEY,
    team_id    BIGINT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    created_by BIGINT NOT NULL REFERENCES users (id),
    created_at TIMESTAMPTZ NOT NULL
);
