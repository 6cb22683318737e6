-- What the bot posts in the Discord channel of a leaderboard's submissions (ChannelPolicy):
-- 'ranked' (a ranked submission's verdict and places, as before this column), 'none'
-- (nothing; announcements of new leaders go on) or 'all' (every submission's verdict line,
-- whatever its mode). Who set it last, and when, as for the other organisers' controls;
-- NULL for the default nobody chose.
-- depends: 0018.discord-follows

ALTER TABLE leaderboards
    ADD COLUMN channel_policy TEXT NOT NULL DEFAULT 'ranked'
        CHECK (channel_policy IN ('ranked', 'none', 'all')),
    ADD COLUMN channel_policy_set_by TEXT,
    ADD COLUMN channel_policy_set_at TIMESTAMPTZ;
