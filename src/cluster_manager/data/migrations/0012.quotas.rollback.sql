DROP INDEX submissions_user_time;
DROP TABLE user_quotas;
