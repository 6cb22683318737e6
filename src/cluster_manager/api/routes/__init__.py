"""The API's endpoints, by audience; each returns a model of `api/models/`.

Modules:

    popcorn.py  popcorn-cli's protocol: submitting, following, reading runs
    native.py   our own: leaderboards, rankings, tasks, the queue, a user's submissions
    teams.py    teams on a leaderboard: create, invite, join, leave
    admin.py    the organisers' controls, for the admin token only
"""
