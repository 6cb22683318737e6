"""How a Slurm run is named: its dispatch key, its Slurm job id and the job name it runs under."""

from __future__ import annotations

import re

# A key names a directory on the shared file system: no separators, no leading dot.
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
JOB_ID = re.compile(r"[0-9]+")
JOB_NAME_PREFIX = "cm-"


def job_name(key: str) -> str:
    """The Slurm job name of a run: what tells our job from another one with a reused id."""
    return f"{JOB_NAME_PREFIX}{key}"
