"""The files the package ships and reads at run time (package data, see pyproject.toml).

`gpus.yml` is the default GPU registry (CLUSTER_MANAGER_GPUS names another), `migrations/`
the schema as yoyo migrations, `examples/` the example tasks the demo and /verifyruns use.
They are read as folders on disk (yoyo and the task loader take paths), so the package is
installed unzipped, as pip does; the runner needs that anyway (sandbox/plan.py).
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
GPUS_FILE = DATA_DIR / "gpus.yml"
MIGRATIONS_DIR = DATA_DIR / "migrations"
EXAMPLES_DIR = DATA_DIR / "examples"
