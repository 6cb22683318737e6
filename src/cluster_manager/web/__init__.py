"""The web pages `cluster-manager serve` shows beside the API: server-rendered HTML (Jinja2
templates, one stylesheet, no build step) over the same `Service`.

    pages.py       the routes: the leaderboards' tiles, charts
    templates/     the HTML
    static/        the stylesheet
"""
