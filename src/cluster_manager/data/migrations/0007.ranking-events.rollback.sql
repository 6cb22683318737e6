DROP TABLE ranking_events;
