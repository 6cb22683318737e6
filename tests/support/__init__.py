"""Helpers the tests share: fakes at the network edge, a replaying launcher, Postgres and
Slurm fixtures, plugins. Nothing here is collected as a test."""
