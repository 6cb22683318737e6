"""The `cluster-manager` command. Settings are built here and passed down to each command.

Exit codes: 0 the submission passed, 1 it did not, 2 bad input (a one-line error, written by
`errors.error_line`).

A command's body is written once against `service.port.ServicePort`; `common.with_port` hands
it the database's `Service`, or `remote_service.RemoteService` (the HTTP API, read back into
the same records by the API's own models, `api/models/`) when CLUSTER_MANAGER_API_URL is set.

    common.py           the group, settings, exit codes, the app's lifetime, `with_port`
    local_eval.py       `eval`: one submission against one task here, no database
    leaderboard.py      `leaderboard check|create|list|show|delete|task|template`
    sync.py             `leaderboard sync`: a problem set's leaderboards from its competition file
    export.py           `leaderboard export`: a leaderboard's results as a data set
    submit.py           `submit`: store, run with live progress, report, place
    profiling.py        `submit --mode profile`'s Nsight Compute filter options
    gpu_names.py        GPU type names as users type them (`cpu` is `CPU`), with suggestions
    join.py             `join CODE`: an invite-only leaderboard
    team.py             `team ...`: teams on a leaderboard
    queue.py            `queue`: each GPU type's line and the user's places in it
    admin.py            `admin ...`: organisers' controls
    user.py             `user token`: API tokens for users of the terminal
    db.py               `db migrate|backup|restore`
    worker.py           `worker`: a long-running scheduler
    serve.py            `serve`: the HTTP API and the pages, with a scheduler of its own
    bot.py              `bot`: the Discord bot, with a scheduler of its own
    logs.py             the long-running commands' log: stderr, text or JSON, secrets scrubbed
    errors.py           the one-line answer to each error, for the commands that end on one
    demo.py             `demo`, over `demo_run.py`
    demo_run.py         `make demo`: example leaderboards, right and wrong kernels, rankings
    api_client.py       the HTTP API from the client's side (httpx, server-sent events)
    remote_service.py   `RemoteService`: `ServicePort` over the HTTP API
    remote_controls.py  its organisers' half, over the admin API
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    """The `cluster-manager` script (a process's entry: never called in another program).

    Start-up (the command's modules, their classes and tables: most of what the process will
    ever hold) runs with the collector off, then is frozen out of every later collection and
    of the one at exit: about 20 ms of a command whose own work, for `eval`, is about 0.1 s.
    """
    gc.disable()
    from cluster_manager.cli.common import cli, import_command

    import_command(sys.argv[1] if len(sys.argv) > 1 else "")
    gc.freeze()
    gc.enable()
    cli(prog_name="cluster-manager")
