"""The `cluster-manager` command. Settings are built here and passed down to each command.

Exit codes: 0 the submission passed, 1 it did not, 2 bad input (a one-line error).

A command's body is written once against `service.port.ServicePort`; `common.with_port` hands
it the database's `Service`, or `remote_service.RemoteService` (the HTTP API, read back into
the same records by the API's own models, `api/models/`) when CLUSTER_MANAGER_API_URL is set.
"""

from __future__ import annotations

# Each command's module is imported when that command runs (see `LazyGroup`).
from cluster_manager.cli.common import cli


def main() -> None:
    cli(prog_name="cluster-manager")
