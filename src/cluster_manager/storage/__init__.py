"""Postgres: the asyncpg pool, migrations and every SQL statement of the project.

database.py       where the database is (DATABASE_URL or an embedded Postgres), the pool
runtime_dir.py    the runtime directory the embedded Postgres's lock lives in
migrations.py     the schema migrations with yoyo, shipped in data/migrations/
backup.py         backups with pg_dump and their restore
pg_tools.py       Postgres's own client programs: where they are, how one is run
installation.py   this installation's id, carried in every dispatch key
leaderboards.py   users, leaderboards, their GPU types and templates
submissions.py    submissions and their code, stored once per distinct file
jobs.py           the durable job queue: claims with leases and heartbeats
queue_order.py    the order a GPU type's queued jobs start in, and each one's place
unserved.py       queued jobs of GPU types no live scheduler serves, failed in time
queue.py          the queue as users see it
served.py         which GPU types the live schedulers serve
runs.py           run results, written once per job, and the rankings they feed
rankings.py       the rankings as front ends read them, one entry per team or user
history.py        the ranking's history, as the charts show it
throttling.py     ranked runs on a throttled GPU: held, and their pair run once more
scripts.py        `/run` scripts: their GPU slots and per-user count
quotas.py         what the quotas count, and the overrides admins set
controls.py       organisers' switches: pauses and bans
invites.py        invite codes of closed leaderboards
teams.py          teams, their members and invite codes
tokens.py         API tokens, stored as hashes
sessions.py       web sessions, stored by the hash of their id
follows.py        submissions followed in Discord, until their report is sent
announcements.py  the leaders last announced per leaderboard and GPU
stats.py          counts for organisers
metrics.py        the figures /metrics exposes
ended_totals.py   the ended jobs' running totals, kept by the transactions that end them
exports.py        a leaderboard's data set, read in pages
singletons.py     one process per role and key, held by an advisory lock
"""
