"""Runs the real runner entrypoint as the machines people use run it: as root, and as an
ordinary user (a GitHub or Slurm runner), with planted secrets around it."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster_manager.core.models import RunRequest
from cluster_manager.core.payload import encode_payload
from cluster_manager.core.run_results import RunResult

PLAIN_USER = "cm-sandbox-test"
RUNNER_TIMEOUT_S = 180


def ensure_plain_user() -> pwd.struct_passwd:
    """An ordinary account with a home, created once on this machine (root only)."""
    try:
        return pwd.getpwnam(PLAIN_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/sh", PLAIN_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(PLAIN_USER)


def _reachable_interpreter_script() -> str:
    """Shell lines that make this Python reachable for the plain user, in a mount namespace
    of the command's own: a Python under /root (pyenv) sits behind a closed directory."""
    blocked = [p for p in Path(sys.base_prefix).resolve().parents if p != Path("/")]
    closed = [p for p in blocked if not os.stat(p).st_mode & 0o001]
    if not closed:
        return ""
    outer = str(closed[-1])
    inner = str(Path(sys.base_prefix).resolve())
    return (
        f"mkdir -p /run/cm-python && mount --bind {inner} /run/cm-python && "
        f"mount -t tmpfs -o mode=0755,size=1m tmpfs {outer} && "
        f"mkdir -p {inner} && mount --bind /run/cm-python {inner} && "
    )


def plain_user_command(argv: Sequence[str], home: str) -> list[str]:
    """`argv` as the plain user, with nothing of root's but a reachable interpreter."""
    user = ensure_plain_user()
    script = _reachable_interpreter_script() + 'exec "$@"'
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        script,
        "sh",
        "setpriv",
        f"--reuid={user.pw_uid}",
        f"--regid={user.pw_gid}",
        "--init-groups",
        "--",
        "env",
        f"HOME={home}",
        *argv,
    ]


def run_entrypoint(
    request: RunRequest,
    *,
    plain_user: bool,
    env: Mapping[str, str],
    payload_dir: Path,
) -> tuple[RunResult, str, Path]:
    """Runs the request through `python -m cluster_manager.harness.runner --payload FILE`.

    Returns the result, the runner's own stderr, and where the payload file was (gone by now).
    """
    payload = payload_dir / "payload.txt"
    payload.write_text(encode_payload(request), encoding="utf-8")
    output = payload_dir / "result.json"
    argv = [
        sys.executable,
        "-m",
        "cluster_manager.harness.runner",
        "--payload",
        str(payload),
        "--output",
        str(output),
    ]
    full_env = {**os.environ, **env}
    if plain_user:
        user = ensure_plain_user() if os.geteuid() == 0 else None
        if user is not None:
            os.chown(payload_dir, user.pw_uid, user.pw_gid)
            os.chown(payload, user.pw_uid, user.pw_gid)
            argv = plain_user_command(argv, user.pw_dir)
    done = subprocess.run(
        argv,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=RUNNER_TIMEOUT_S,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    if done.returncode != 0 or not output.is_file():
        raise AssertionError(f"the runner failed ({done.returncode}): {done.stderr[-3000:]}")
    result = RunResult.from_json(json.loads(output.read_text("utf-8")))
    return result, done.stderr, payload


def home_of(plain_user: bool) -> Path:
    if plain_user and os.geteuid() == 0:
        return Path(ensure_plain_user().pw_dir)
    return Path(os.environ.get("HOME") or pwd.getpwuid(os.geteuid()).pw_dir)


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
