"""The project installs as a real package: a wheel of it, installed into a venv of its own, runs
from a directory that is not the checkout with every file it reads shipped inside it: it
migrates an empty database, loads every shipped example, and runs a submission to an example's
leaderboard through the queue and the harness.

Offline: the wheel is built without build isolation (setuptools and wheel come from the test's
own environment) and installed without dependencies; a `.pth` line gives the new venv the test
environment's site-packages for those. A plain path line does not run the `.pth` files there
(the editable install's among them), so `cluster_manager` comes from the wheel, as asserted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import ROOT
from tests.support import database

pytestmark = pytest.mark.slow

# What a wheel is built from; everything else in the checkout must not be needed.
SOURCES = ("pyproject.toml", "README.md", "src")
# Where the installed package says its files are, that they exist, and that every example its
# problem set lists loads from them; the identity example's folder and solution come last.
WHERE = """
import cluster_manager
from cluster_manager.core.competition import load_competition
from cluster_manager.core.task import load_task
from cluster_manager.data import EXAMPLES_DIR, GPUS_FILE, MIGRATIONS_DIR
print(cluster_manager.__file__)
shipped = (GPUS_FILE, MIGRATIONS_DIR / "0001.initial.sql", EXAMPLES_DIR / "softmax_py/task.yml")
for path in shipped:
    assert path.exists(), path
    print(path)
problems = load_competition(EXAMPLES_DIR / "examples.yaml").problems
assert len(problems) == 5, problems
for problem in problems:
    load_task(problem.directory)
    print(problem.directory)
identity = EXAMPLES_DIR / "identity_py"
print(identity, identity / "submission.py")
"""
FUTURE = "2099-01-01T00:00:00+00:00"


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def build_wheel(out: Path) -> Path:
    """From a copy of the sources: a build in the checkout would leave `build/` there."""
    tree = out / "tree"
    tree.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=skip)
        else:
            shutil.copy2(source, tree / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(tree)])
    (wheel,) = out.glob("cluster_manager-*.whl")
    return wheel


def make_venv(venv: Path, wheel: Path) -> Path:
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    run([*pip, "install", "--no-deps", "--no-index", str(wheel)])
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    deps = sysconfig.get_path("purelib")  # this environment's: the dependencies, torch included
    (Path(purelib.stdout.strip()) / "test-deps.pth").write_text(deps + "\n")
    return python


@pytest.fixture
def empty_db_url(pg_server: str) -> Iterator[str]:
    """A database of its own that no migration has touched yet."""
    name = "cm_wheel_" + os.urandom(4).hex()
    with database._admin(pg_server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database._with_database(pg_server, name)
    finally:
        database.drop(pg_server, name)


@pytest.mark.timeout(900)
def test_the_installed_wheel_runs_from_anywhere_on_its_own_files(tmp_path: Path, empty_db_url: str):
    wheel = build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as built:  # what `serve` reads at run time ships too
        names = set(built.namelist())
    for needed in (
        "web/templates/home.html",
        "web/templates/submission.html",
        "web/static/style.css",
        "web/static/live.js",
        "data/gpus.yml",
    ):
        assert f"cluster_manager/{needed}" in names, needed
    venv = (tmp_path / "venv").resolve()
    python = make_venv(venv, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "CLUSTER_MANAGER_GPUS"}}
    env.update(DATABASE_URL=empty_db_url, CLUSTER_MANAGER_DATA_DIR=str(tmp_path / "data"))

    where = run([str(python), "-c", WHERE], cwd=elsewhere, env=env).stdout.split()
    assert all(Path(p).resolve().is_relative_to(venv) for p in where), where
    assert not any(Path(p).resolve().is_relative_to(ROOT) for p in where), where
    identity, submission = Path(where[-2]), Path(where[-1])

    def cm(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(venv / "bin" / "cluster-manager"), *args]
        return run(command, cwd=elsewhere, env=env, timeout=300)

    # The schema from the wheel's own migrations, into the database at DATABASE_URL.
    migrated = cm("db", "migrate")
    assert "applied: 0001.initial" in migrated.stdout, migrated.stdout
    created = cm(
        "leaderboard", "create", "identity", "--task", str(identity), "--deadline", FUTURE,
        "--gpu", "CPU",
    )  # fmt: skip
    assert "created identity on CPU" in created.stdout, created.stdout
    # A submission runs through the queue and the harness, from the wheel, and is stored.
    submitted = cm("submit", "identity", str(submission), "--user", "alice", "--mode", "test")
    assert "[CPU] ✅ passed" in submitted.stderr, submitted.stdout + submitted.stderr
    with psycopg.connect(empty_db_url) as conn:
        verdicts = [row[0] for row in conn.execute("SELECT verdict FROM runs").fetchall()]
    assert verdicts == ["passed"]
