"""Text and images made from the service's records, shared by every front end.

reports.py  a submission's report, rankings and task checks as plain text
ops.py      operational views: stats, pauses and bans, the queue, a sync's plan
charts.py   ranking and history charts (PNG), the same for the web and the bot
exports.py  a leaderboard as files, page by page: CSV, JSON lines or Parquet
"""
