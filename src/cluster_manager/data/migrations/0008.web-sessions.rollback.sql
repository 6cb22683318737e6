DROP INDEX rankings_submission;
DROP TABLE web_sessions;
