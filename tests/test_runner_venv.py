"""The runner machine's environment: named by its content, built once under a lock in a
temporary folder, renamed into place, never used half-built, reused by later jobs."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster_manager.runners import venv as runner_venv
from cluster_manager.runners.venv import (
    BUILDING_PREFIX,
    COMPLETE_MARKER,
    LAST_USED_MARKER,
    EnvSpec,
    ensure,
    prune,
)

pytestmark = pytest.mark.timeout(180)


def _requirements(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "requirements-runner.txt"
    path.write_text(text)
    return path


@pytest.fixture
def pipless(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environments built without pip or their requirements (ensurepip alone takes seconds),
    for tests of when they are built, reused and removed rather than of what they hold."""

    def build(target: Path, spec: EnvSpec) -> None:
        venv = [sys.executable, "-m", "venv", "--without-pip", str(target)]
        if spec.system_site_packages:
            venv.insert(3, "--system-site-packages")
        subprocess.run(venv, check=True)

    monkeypatch.setattr(runner_venv, "_build", build)


def _builder(requirements: Path, root: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "cluster_manager.runners.venv"]
    return subprocess.Popen(
        [*command, "--requirements", str(requirements), "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a job's steps are one process group: a cancel kills them all
    )


def test_the_name_follows_what_is_installed(tmp_path: Path) -> None:
    text = "# pinned\ntorch==2.13.0\nnumpy==2.4.6  # arrays\n\ncryptography==50.0.2\n"
    spec = EnvSpec.from_file(_requirements(tmp_path, text))
    assert spec.requirements == ("torch==2.13.0", "numpy==2.4.6", "cryptography==50.0.2")
    assert spec.digest() == EnvSpec.from_file(_requirements(tmp_path, text)).digest()
    newer = EnvSpec.from_file(_requirements(tmp_path, text.replace("50.0.2", "50.0.3")))
    assert newer.digest() != spec.digest()
    assert spec.digest(python="/usr/bin/python3.11") != spec.digest()

    machine = EnvSpec.from_file(_requirements(tmp_path, text), system_packages=["Torch", "NumPy"])
    assert machine.requirements == ("cryptography==50.0.2",)
    assert machine.system_site_packages
    assert machine.digest() != EnvSpec(machine.requirements).digest()


def test_a_built_environment_works_where_it_was_renamed_to_and_is_reused(
    tmp_path: Path,
) -> None:
    spec, root, said = EnvSpec(()), tmp_path / "venvs", []
    first = ensure(spec, root, log=said.append)
    assert first == root / spec.digest()
    assert not list(root.glob(f"{BUILDING_PREFIX}*"))
    # The scripts point at the final folder, not the temporary one they were built in.
    # (A long path gets pip's `#!/bin/sh` + `exec` form of the shebang: the same holds.)
    script = (first / "bin" / "pip").read_text()
    assert f"{first}/bin/python" in script.splitlines()[0] + script.splitlines()[1]
    assert BUILDING_PREFIX not in script
    pip = subprocess.run([str(first / "bin" / "pip"), "--version"], capture_output=True, text=True)
    assert pip.returncode == 0 and str(first) in pip.stdout
    built = (first / "bin" / "python").lstat().st_ino

    assert ensure(spec, root, log=said.append) == first
    assert (first / "bin" / "python").lstat().st_ino == built
    assert [line.split()[-1] for line in said if "reused" in line] == ["reused"]


def test_two_jobs_at_once_build_it_once(tmp_path: Path) -> None:
    requirements, root = _requirements(tmp_path, ""), tmp_path / "venvs"
    jobs = [_builder(requirements, root) for _ in range(2)]
    outputs = [job.communicate(timeout=150) for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0]
    paths = {out.strip() for out, _ in outputs}
    assert len(paths) == 1
    logs = "".join(err for _, err in outputs)
    # Built once; the other job waited for it, or (started late) found it built.
    assert logs.count("building") == 1 and "reused" in logs
    assert Path(paths.pop(), "bin", "python").exists()


def test_a_job_killed_while_building_leaves_nothing_that_is_used(tmp_path: Path) -> None:
    requirements, root = _requirements(tmp_path, ""), tmp_path / "venvs"
    victim = _builder(requirements, root)
    deadline = time.monotonic() + 60
    while not list(root.glob(f"{BUILDING_PREFIX}*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    spec = EnvSpec.from_file(requirements)
    assert list(root.glob(f"{BUILDING_PREFIX}*")), "killed while building"
    assert not (root / spec.digest()).exists()

    said: list[str] = []
    final = ensure(spec, root, log=said.append)
    assert any("building" in line for line in said)
    assert not list(root.glob(f"{BUILDING_PREFIX}*"))
    check = subprocess.run(
        [str(final / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == str(final)


def _age(env: Path, days: float) -> None:
    """As if no job used `env` for `days`."""
    then = time.time() - days * 86400
    for marker in (LAST_USED_MARKER, COMPLETE_MARKER):
        os.utime(env / marker, (then, then))


@pytest.mark.usefixtures("pipless")
def test_an_environment_no_job_used_for_the_kept_days_is_removed(tmp_path: Path) -> None:
    root, said = tmp_path / "venvs", []
    old = ensure(EnvSpec(()), root, log=said.append)
    _age(old, 15)
    (root / "site-data").mkdir()  # not an environment's name: never touched

    new = ensure(EnvSpec(("# another requirement set",)), root, log=said.append)
    assert new != old and (new / "bin" / "python").exists()
    assert not old.exists() and not list(root.glob(".removing-*"))
    assert (root / "site-data").is_dir()
    assert f"runner environment {old} removed: no job used it for 14 days" in said

    # Used recently, it stays; and the removed one is built again when a job needs it.
    _age(new, 13)
    assert ensure(EnvSpec(()), root, log=said.append) == old and new.exists()
    assert sum(line.startswith(f"runner environment {old}: building") for line in said) == 2


@pytest.mark.usefixtures("pipless")
def test_an_environment_in_use_or_being_built_is_not_removed(tmp_path: Path) -> None:
    root = tmp_path / "venvs"
    env = ensure(EnvSpec(()), root, log=lambda _: None)
    _age(env, 30)
    lock = root / f"{env.name}.lock"
    with lock.open("a+b") as handle:  # a job marking it as used, or building it, holds this
        fcntl.flock(handle, fcntl.LOCK_SH)
        assert prune(root) == []
        fcntl.flock(handle, fcntl.LOCK_UN)
    assert env.exists()
    assert prune(root, keep=env.name) == [] and env.exists()
    assert prune(root) == [env] and not env.exists()


@pytest.mark.usefixtures("pipless")
def test_a_reused_environment_is_marked_as_used(tmp_path: Path) -> None:
    root = tmp_path / "venvs"
    env = ensure(EnvSpec(()), root, log=lambda _: None)
    _age(env, 30)
    assert ensure(EnvSpec(()), root, log=lambda _: None) == env
    assert time.time() - (env / LAST_USED_MARKER).stat().st_mtime < 60
    assert prune(root) == [] and env.exists()


@pytest.mark.parametrize(
    ("value", "error"), [("-2", "must be 0 or more"), ("two", "invalid float value: 'two'")]
)
def test_a_wrong_keep_days_is_refused_before_anything_is_built(
    tmp_path: Path, value: str, error: str
) -> None:
    requirements, root = _requirements(tmp_path, ""), tmp_path / "venvs"
    command = [sys.executable, "-m", "cluster_manager.runners.venv", "--requirements"]
    refused = subprocess.run(
        [*command, str(requirements), "--root", str(root)],
        env={**os.environ, "CLUSTER_MANAGER_VENV_KEEP_DAYS": value},
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and error in refused.stderr and "--keep-days" in refused.stderr
    assert not root.exists()
