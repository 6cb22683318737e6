"""The HTTP API: the third front end, beside the CLI and the Discord bot, over the same
`Service`. It speaks popcorn-cli's protocol, so that client works against it unchanged.

    app.py             the ASGI app: routes, error answers, the per-token rate limit
    auth.py            who calls: an API token (X-Popcorn-Cli-Id or Bearer) or the admin token
    error_handlers.py  every refusal as {"detail": ...} with its status; a 500 carries a log id
    uploads.py         the submitted file from a bounded multipart body, or from a small archive
    models/            every answer's JSON as a pydantic model: what the routes return, what
                       `/openapi.json` documents and what our CLI reads records back from
    client_status.py   a submission's state in popcorn-cli's words, and what went wrong
    streams.py         server-sent events: live progress of a submission, then its result
    metrics.py         GET /metrics (Prometheus): who may read it, one scrape's exposition
    job_metrics.py     the queue and the jobs as metric families, from the database's figures
    request_timing.py  each request's latency by route template, method and status class
    routes/            the endpoints, by audience: popcorn-cli's, our own (native), admin's
"""
