DROP TABLE served_gpus;
