-- Submissions members follow in Discord, and where: after a restart of the bot each one not
-- yet reported is followed again (in a direct message, or the channel says where its report
-- will be) and its report is sent. A row goes once its report went out.
-- depends: 0017.served-gpus

CREATE TABLE discord_follows (
    submission_id BIGINT PRIMARY KEY REFERENCES submissions (id) ON DELETE CASCADE,
    member_id     BIGINT NOT NULL,  -- the submitter's Discord id, for direct messages
    channel_id    BIGINT NOT NULL,  -- where they ran the command
    started_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
