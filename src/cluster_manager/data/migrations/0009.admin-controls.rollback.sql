DROP TABLE user_bans;
DROP TABLE submission_pauses;
