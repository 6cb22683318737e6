"""Text and images made from the service's records, shared by every front end.

reports.py  a submission's report, its outcome in a word, rankings and task checks as text
speed.py    speed-of-light figures as text: the report's table, a one-line summary, page cells
ops.py      operational views: stats, pauses and bans, the queue, a sync's plan
charts.py   ranking and history charts (SVG for pages, wide or phone-sized; PNG for the bot)
exports.py  a leaderboard as files, page by page: CSV, JSON lines or Parquet
"""
