"""Runs requests on GitHub Actions: one `workflow_dispatch` per run, on self-hosted GPU runners.

The GPU type's parameters name the workflow (`workflow`, e.g. "nvidia_workflow.yml") and the
runner labels (`runner_labels`). The request travels as the `payload` input (core.payload); the
workflow's `run-name` is `cm job <key>`, which is how a run is found again by its dispatch key;
the runner's result.json comes back as the run's artifact named `result`.

    client.py    the token pool: GitHub's REST API, rate limits, retries, error mapping
    runs.py      finding runs by id or key, polling and caching them, their states
    payloads.py  the sealed inputs of a dispatch and the result artifact read back
    launcher.py  GitHubLauncher: dispatch, follow, result, cancel, close
"""

from cluster_manager.launchers.github.client import GitHubRateLimitedError
from cluster_manager.launchers.github.launcher import GitHubLauncher
from cluster_manager.launchers.github.payloads import (
    MAX_RESULT_BYTES,
    RESULT_ARTIFACT,
    RESULT_FILE,
)
from cluster_manager.launchers.github.runs import RUN_NAME

__all__ = [
    "MAX_RESULT_BYTES",
    "RESULT_ARTIFACT",
    "RESULT_FILE",
    "RUN_NAME",
    "GitHubLauncher",
    "GitHubRateLimitedError",
]
