"""The runtime directory the embedded Postgres is given when the session has none."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_manager.storage.runtime_dir import RUNTIME_ENV, ensure_runtime_dir

# pgserver asks platformdirs for the runtime directory when it is imported; the warning about
# it, an error here (the -W option cannot name a third-party category).
IMPORT = """
import warnings, platformdirs
warnings.simplefilter("error", platformdirs.RuntimeDirWarning)
from cluster_manager.storage.runtime_dir import ensure_runtime_dir
{}
import pgserver
"""


def _import_pgserver(tmp_path: Path, *, ensure: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != RUNTIME_ENV} | {"TMPDIR": str(tmp_path)}
    code = IMPORT.format("ensure_runtime_dir()" if ensure else "")
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_without_one_pgserver_is_given_a_private_one_and_no_warning(tmp_path: Path):
    if not hasattr(pytest.importorskip("platformdirs"), "RuntimeDirWarning"):
        pytest.skip("this platformdirs falls back without a warning")
    assert _import_pgserver(tmp_path, ensure=False).returncode != 0  # what it fixes
    done = _import_pgserver(tmp_path, ensure=True)
    assert done.returncode == 0, done.stderr


def test_an_unset_one_becomes_a_private_directory_of_the_user(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    environ: dict[str, str] = {}
    ensure_runtime_dir(environ)
    info = Path(environ[RUNTIME_ENV]).lstat()
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
    assert info.st_mode & 0o777 == 0o700


def test_one_already_set_is_left_alone():
    environ = {RUNTIME_ENV: "/somewhere/else"}
    ensure_runtime_dir(environ)
    assert environ == {RUNTIME_ENV: "/somewhere/else"}


def test_a_symlink_in_its_place_is_not_taken(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / f"cluster-manager-{os.geteuid()}").symlink_to(elsewhere)
    environ: dict[str, str] = {}
    ensure_runtime_dir(environ)
    session = Path(f"/run/user/{os.geteuid()}")
    assert environ.get(RUNTIME_ENV) in {None, str(session)}
