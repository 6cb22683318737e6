DROP TABLE announced_leaders;
