"""The HTTP API's answers as pydantic models, written once: the routes return them (FastAPI
writes their JSON and their schema into `/openapi.json`), the CLI's client reads the same
JSON back with `Model.model_validate` and turns it into the service's records with
`to_record()`. The fields popcorn-cli reads keep its names, nulls and omissions.

    base.py               ApiModel, `Moment` (times as `isoformat` writes them), fields left
                          out rather than null
    leaderboards.py       a task's summary, a leaderboard, its rankings and the peaks
    submissions.py        a submit's answer, a user's submissions, one with its jobs
    runs.py               a run: verdict, the protocol's key form, diagnostics, speed of light
    teams.py              a team, a team's invite code, a team left
    answers.py            a refusal's detail, health, the queue, what an action did
    admin.py              the organisers' pauses, bans, invites, quotas, stats
    leaderboard_admin.py  the organisers' leaderboard settings, reruns, a problem set's sync
"""
