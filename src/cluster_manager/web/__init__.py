"""The web pages, served by `cluster-manager serve` beside the API, over the same `Service`:
server-rendered HTML (Jinja2), one stylesheet, one small script for live progress.

    rendering.py    templates, security headers, refusals as pages, HTML-or-JSON by Accept
    view_models.py  what the templates show: scores in human units, gaps, rows, verdicts
    marks.py        pass and fail marks as inline SVG (no emoji: many machines lack the font)
    markdown_text.py  a task's Markdown description as safe HTML (no raw HTML, http(s) links)
    pages.py        the tiles, a leaderboard's page, its charts (wide and phone) and files
    speed_views.py  a leaderboard's speed of light: each case's work and floors, scores' share
    submissions.py  a submission's page and the submit form
    teams.py        the leaderboard page's team forms: create, invite, join, leave
    sessions.py     signing in with an API token (a session cookie), and out
    api_docs.py     `/docs`: the HTTP API's reference, from the app's OpenAPI schema
"""
