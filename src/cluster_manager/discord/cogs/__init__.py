"""The bot's cogs: thin command layers over the service.

leaderboard.py  `/leaderboard ...`: submit to, create, delete, list and read leaderboards
run.py          `/run`: an unranked script run on a GPU
team.py         `/team ...`: teams on a leaderboard
account.py      `/token` and `/join`
admin.py        `/admin ...` for the Leaderboard Admin role
ops.py          `/ping`, `/queue`, `/verifydb`, `/verifyruns`, `/resync`
"""
