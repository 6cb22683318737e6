-- Follows are no longer kept: a restarted bot leaves its earlier follows unreported.

DROP TABLE discord_follows;
