# Two commands matter: `make demo` and `make test`. Both install into .venv first. After adding
# a migration, `make schema` writes schema.sql anew (the test suite checks it).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test durations reliability lint format bench bench-quick clean slurm-up slurm-down lock \
	gpu-check gpu-carry schema

# Byte-compiles the package as a wheel install would: with PYTHONDONTWRITEBYTECODE set (as on
# many CI machines) nothing else writes the .pyc files of an editable install, and every
# `cluster-manager` command would compile its modules anew. Only changed files are redone.
setup: $(STAMP)
	$(BIN)/python -m compileall -q src/cluster_manager

# Exactly what requirements/dev.lock pins, each file checked against its hash; then this package
# itself, without dependencies (they are all in the lock).
$(STAMP): pyproject.toml requirements/dev.lock
	bash scripts/sandbox/install.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

# pyproject.toml's extras are the only place dependencies are declared; requirements/*.lock are
# made from them by uv (pinned, with hashes), one per install target:
#   dev.lock          `make setup`: the `dev` extra (bot + runner + tests, linters, mypy, uv)
#   bot.lock          the bot host: the `bot` extra
#   runner-cpu.lock   the `runner` extra with torch's CPU build (the NVIDIA workflow without an
#                     NVIDIA driver: act in the tests and benchmarks)
#   runner-cuda.lock  the `runner` extra with PyPI's CUDA build of torch: NVIDIA machines, Slurm
#   runner-rocm.lock  the `runner` extra less torch and numpy, which an AMD machine's ROCm brings
# After editing the dependencies in pyproject.toml: `make lock`, and commit pyproject.toml and
# the locks together (tests/test_dependency_lock.py fails while they disagree). uv keeps every
# pin already in a lock while it still fits; `make lock UPGRADE=--upgrade` moves all of them to
# the newest releases, `UPGRADE="--upgrade-package NAME"` one. It needs the package index, and
# the CPU build of torch in TORCH_CPU_WHEELS (where this machine kind keeps it; pip finds it there
# through its find-links) for dev.lock and runner-cpu.lock. Resolved for CPython 3.11 on x86-64
# Linux whatever machine runs it; each pin lists the hashes of all its files on the index.
UV ?= $(BIN)/uv
TORCH_CPU_WHEELS ?= /opt/wheels
UPGRADE ?=
LOCK = $(UV) pip compile pyproject.toml --quiet --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --no-strip-extras --custom-compile-command "make lock" \
	$(UPGRADE)

# uv comes with the dev extra (`make lock UV=uv` takes another one, e.g. when the lock is broken).
lock: $(if $(filter $(BIN)/uv,$(UV)),$(STAMP))
	$(LOCK) --extra dev --find-links $(TORCH_CPU_WHEELS) -o requirements/dev.lock
	$(LOCK) --extra bot -o requirements/bot.lock
	$(LOCK) --extra runner --find-links $(TORCH_CPU_WHEELS) -o requirements/runner-cpu.lock
	$(LOCK) --extra runner -o requirements/runner-cuda.lock
	printf 'torch\nnumpy\n' | $(LOCK) --extra runner --excludes /dev/stdin -o requirements/runner-rocm.lock

demo: setup
	$(BIN)/cluster-manager demo

# Tests use DATABASE_URL, else a Postgres answering on 127.0.0.1:5432, else an embedded one.
LOCAL_PG := postgresql://postgres@127.0.0.1:5432/postgres

# The Slurm tests need the one-node cluster on loopback (root, Debian); CI must have it.
SLURM_UP := if [ "$$(id -u)" = 0 ]; then bash scripts/slurm/setup.sh || [ -z "$$CI" ]; fi
# The browser tests drive Debian's chromium (installed here as root when missing).
BROWSER_UP := if [ "$$(id -u)" = 0 ]; then bash scripts/web/install-browser.sh || [ -z "$$CI" ]; fi
# The deployment checks run docker-compose (Debian's; no Docker daemon needed).
COMPOSE_UP := if [ "$$(id -u)" = 0 ]; then bash scripts/ops/install-compose.sh || [ -z "$$CI" ]; fi
# One test at a time per process (--maxschedchunk 1): xdist's default first hands each process a
# quarter of the suite in collection order, which would give one of them every heavy test.
TEST_DATABASE := DATABASE_URL="$${DATABASE_URL:-$$(pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo $(LOCAL_PG))}"
PYTEST := $(TEST_DATABASE) $(BIN)/pytest -n 2 --dist load --maxschedchunk 1
# Tests marked `alone` judge an order of speeds, which the other test process's load blurs
# (docs/MEASUREMENT.md, "Contention costs precision"): they run after the rest, one process,
# their coverage added to the rest's before the floor is checked.
PYTEST_ALONE := $(TEST_DATABASE) $(BIN)/pytest -m alone

test: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy
	$(SLURM_UP)
	$(BROWSER_UP)
	$(COMPOSE_UP)
	$(PYTEST) -m "not alone" --cov --cov-report= --cov-fail-under=0
	$(PYTEST_ALONE) --cov --cov-append --cov-report=

# schema.sql: the schema the migrations make, dumped by pg_dump from a database migrated on the
# tests' server and dropped after (tests/support/schema.py); tests/storage/test_schema.py holds
# the file to the migrations.
schema: setup
	$(TEST_DATABASE) $(BIN)/python -m tests.support.schema

# tests/durations.json: which tests are heavy, so that they are scheduled first.
durations: setup
	$(SLURM_UP)
	$(BROWSER_UP)
	$(COMPOSE_UP)
	$(PYTEST) --store-durations

# docs/RELIABILITY.md: every attack, bad input and fault the suite tries, and its outcome.
reliability: setup
	$(SLURM_UP)
	$(PYTEST) -m reliability --reliability-report=docs/RELIABILITY.md

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format src tests benchmarks scripts
	$(BIN)/ruff check --fix src tests benchmarks scripts

# Speed and memory figures against their targets (docs/PERFORMANCE.md); needs the Postgres
# at DATABASE_URL or 127.0.0.1:5432 (it creates and drops cm_bench_* databases).
bench: setup
	$(BIN)/python benchmarks/run.py

# The same but honest_verdicts (336 sandboxed runs, close to an hour); results.json is kept.
bench-quick: setup
	$(BIN)/python benchmarks/run.py --quick

# The GPU check (docs/GPU.md): on a machine with an NVIDIA GPU, from a copy of this tree (no
# network needed, nothing installed but into a folder of /tmp). `gpu-carry` fills .gpu-carry/
# with what it installs there, here, where the package index is reachable; REFERENCE_KERNELS=PATH
# adds the public problem sets from a checkout of gpu-mode/reference-kernels.
gpu-check:
	bash scripts/gpu/check

gpu-carry: setup
	bash scripts/gpu/carry.sh

slurm-up:
	bash scripts/slurm/setup.sh

slurm-down:
	bash scripts/slurm/stop.sh

clean:
	rm -rf $(VENV) .data .pytest_cache .ruff_cache
