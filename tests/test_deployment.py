"""What docs/OPERATING.md hands an organiser to copy: the systemd units and the compose file
pass their own tools' checks, every command line in them is one the CLI accepts, the example
environment file loads, and the server's lock holds no test tools."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cluster_manager.settings import load_settings
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
COMPOSE = DEPLOY / "compose" / "compose.yaml"
INSTALLED = "/opt/cluster-manager/venv/bin/cluster-manager"
# Read by the library that needs them, not by this package's code.
READ_BY_LIBRARIES = {"MODAL_TOKEN_SECRET"}


def tool(name: str, installer: str) -> str:
    found = shutil.which(name)
    if found is None:
        message = f"no {name}: `{installer}` (as root) installs it"
        if os.environ.get("CI"):
            pytest.fail(f"CI needs {name} for the deployment checks: {message}")
        pytest.skip(message)
    return found


def accepted_by_the_cli(args: list[str]) -> None:
    """Click parses every option before it acts on --help: an unknown one fails with 2."""
    done = subprocess.run(
        [sys.executable, "-m", "cluster_manager", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (args, done.stderr)


def test_there_are_units_for_the_server_the_workers_and_the_bot():
    assert [u.name for u in UNITS] == [
        "cluster-manager-bot.service",
        "cluster-manager-serve.service",
        "cluster-manager-worker@.service",
    ]


@pytest.mark.parametrize("unit", UNITS, ids=[u.stem for u in UNITS])
def test_each_unit_passes_systemd_analyze_verify(unit: Path, tmp_path: Path):
    analyze = tool("systemd-analyze", "apt-get install systemd")
    # The installed path does not exist here: point the copy at this checkout's command.
    text = unit.read_text().replace(
        INSTALLED, str(Path(sys.executable).with_name("cluster-manager"))
    )
    name = unit.name.replace("@.", "@1.")  # a template is verified as one of its instances
    if "@" in unit.name:
        (tmp_path / unit.name).write_text(text)
    (tmp_path / name).write_text(text)
    done = subprocess.run(
        [analyze, "verify", str(tmp_path / name)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), (
        done.stdout + done.stderr
    )


@pytest.mark.parametrize("unit", UNITS, ids=[u.stem for u in UNITS])
def test_each_units_command_is_one_the_cli_accepts(unit: Path):
    (line,) = re.findall(r"^ExecStart=(.+)$", unit.read_text(), re.M)
    program, *args = shlex.split(line)
    assert program == INSTALLED
    accepted_by_the_cli(args)


def compose_copy(tmp_path: Path) -> Path:
    """The compose file where it can be checked: its build context (the repository's root) and
    the .env an organiser makes from deploy/env.example beside it."""
    folder = tmp_path / "deploy" / "compose"
    shutil.copytree(DEPLOY / "compose", folder)
    shutil.copy(DEPLOY / "env.example", folder / ".env")
    return folder / COMPOSE.name


def test_the_compose_file_passes_docker_compose_config(tmp_path: Path):
    compose = tool("docker-compose", "bash scripts/ops/install-compose.sh")
    done = subprocess.run(
        [compose, "-f", str(compose_copy(tmp_path)), "config"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    assert set(resolved["services"]) == {"postgres", "migrate", "serve", "worker", "bot"}
    serve = resolved["services"]["serve"]
    # The compose network's database wins over the .env file's.
    assert serve["environment"]["DATABASE_URL"].startswith("postgresql://cluster_manager@postgres")
    assert serve["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("service", ["migrate", "serve", "worker", "bot"])
def test_each_compose_command_is_one_the_cli_accepts(service: str):
    spec = yaml.safe_load(COMPOSE.read_text())["services"][service]
    accepted_by_the_cli(spec["command"])


def test_the_example_environment_loads():
    settings = load_settings({}, DEPLOY / "env.example")
    assert settings.database_url and settings.data_dir == Path("/var/lib/cluster-manager")
    assert settings.metrics_enabled and settings.keep_run_folders_hours == 0


@pytest.mark.parametrize("example", [DEPLOY / "env.example", ROOT / ".env.example"])
def test_the_example_environments_name_only_real_settings(example: Path):
    named = re.findall(r"^# ?([A-Z][A-Z0-9_]+)=", example.read_text(), re.M)
    named += re.findall(r"^([A-Z][A-Z0-9_]+)=", example.read_text(), re.M)
    code = "\n".join(p.read_text() for p in (ROOT / "src" / "cluster_manager").rglob("*.py"))
    unknown = [n for n in named if n not in code and n not in READ_BY_LIBRARIES]
    assert named and not unknown, f"{example.name} names settings nothing reads: {unknown}"


def test_the_servers_lock_holds_no_test_tools():
    lock = (ROOT / "requirements" / "bot.lock").read_text()
    pinned = set(re.findall(r"^([a-z0-9][a-z0-9._-]*)==", lock, re.M))
    assert {"fastapi", "uvicorn", "discord-py", "asyncpg", "prometheus-client"} <= pinned
    assert not pinned & {"pytest", "ruff", "mypy", "playwright", "hypothesis", "torch"}
