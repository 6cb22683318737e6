# Two commands matter: `make demo` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test durations reliability lint format bench clean slurm-up slurm-down

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.txt requirements-runner.txt requirements-dev.txt
	bash scripts/sandbox/install.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

demo: setup
	$(BIN)/cluster-manager demo

# Tests use DATABASE_URL, else a Postgres answering on 127.0.0.1:5432, else an embedded one.
LOCAL_PG := postgresql://postgres@127.0.0.1:5432/postgres

# The Slurm tests need the one-node cluster on loopback (root, Debian); CI must have it.
SLURM_UP := if [ "$$(id -u)" = 0 ]; then bash scripts/slurm/setup.sh || [ -z "$$CI" ]; fi
# The browser tests drive Debian's chromium (installed here as root when missing).
BROWSER_UP := if [ "$$(id -u)" = 0 ]; then bash scripts/web/install-browser.sh || [ -z "$$CI" ]; fi
# One test at a time per process (--maxschedchunk 1): xdist's default first hands each process a
# quarter of the suite in collection order, which would give one of them every heavy test.
PYTEST := DATABASE_URL="$${DATABASE_URL:-$$(pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo $(LOCAL_PG))}" \
	$(BIN)/pytest -n 2 --dist load --maxschedchunk 1

test: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy
	$(SLURM_UP)
	$(BROWSER_UP)
	$(PYTEST) --cov --cov-report=

# tests/durations.json: which tests are heavy, so that they are scheduled first.
durations: setup
	$(SLURM_UP)
	$(BROWSER_UP)
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

slurm-up:
	bash scripts/slurm/setup.sh

slurm-down:
	bash scripts/slurm/stop.sh

clean:
	rm -rf $(VENV) .data .pytest_cache .ruff_cache
