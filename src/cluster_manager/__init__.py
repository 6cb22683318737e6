"""GPU-kernel competitions: leaderboards, submissions, and a runner that times kernels.

One package per part, lowest layer first (docs/ARCHITECTURE.md; tests/test_architecture.py
holds who may import whom):

    data/        the files the package ships: gpus.yml, migrations, example tasks
    core/        the domain: tasks, submissions, runs, GPU types, scoring; no adapter
    sandbox/     what a submission may see and do, applied on every launcher
    telemetry/   GPU probes sampled in a thread of the runner
    harness/     the runner entrypoint and the built-in harness, on the GPU machine
    runners/     what ships to runner machines beside the harness
    storage/     Postgres: the pool, migrations and every SQL statement
    launchers/   where runs go: local, GitHub Actions, Slurm, Modal
    service/     what every front end calls
    scheduling/  the queue's consumer
    rendering/   text and images from the service's records, for every front end
    settings.py  the settings, from the environment
    app.py       the composition root: the pool, the registry, the launchers, the service
    api/         the HTTP API
    web/         the web pages the HTTP server serves
    discord/     the Discord bot
    cli/         the `cluster-manager` command, which starts every other front end
    __main__.py  `python -m cluster_manager`
"""

__version__ = "0.1.0"
