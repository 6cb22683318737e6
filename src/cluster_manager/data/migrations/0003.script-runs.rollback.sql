DROP TABLE script_runs;
