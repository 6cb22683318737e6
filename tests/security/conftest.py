"""One hostile run per kind of runner machine, shared by the tests that check its findings.

The run is made once per pytest session and kind (root, plain user): xdist workers wait for
the first one's observations on a lock instead of repeating a run of several seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cluster_manager.core.models import Mode
from tests.adversarial.helpers import LIMITS, small_task
from tests.conftest import ROOT, make_request, processes_with
from tests.security.hostile import hostile_submission, reports
from tests.security.runners import ensure_plain_user, home_of, remove, run_entrypoint

KINDS = ("root", "plain user")
POSTGRES_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"


@dataclass
class Observation:
    """What the hostile submission reported, and what the host looked like afterwards."""

    kind: str
    tag: str
    secrets: dict[str, str]  # name -> a value that must appear nowhere
    reports: list[dict[str, Any]]
    result_json: str
    runner_stderr: str
    system: dict[str, Any]
    verdict: str
    payload_left: bool
    planted_on_host: list[str]  # write targets that exist on the host after the run
    victim_alive: bool
    left_behind: list[int]
    listener_connections: int
    paths: dict[str, str]
    host_changes: list[str] = field(default_factory=list)  # mounts, BPF pins: `_host_state`


def _plant(path: Path, text: str, owner: tuple[int, int] | None = None) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)
    if owner is not None:
        os.chown(path, *owner)


def _start_victim(kind: str) -> subprocess.Popen[bytes]:
    """A process of the runner's own user, which the submission tries to kill."""
    argv = ["sleep", "600"]
    if kind == "plain user" and os.geteuid() == 0:
        user = ensure_plain_user()
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"]
        argv += ["sleep", "600"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def _listeners(tag: str) -> Iterator[tuple[socket.socket, socket.socket, socket.socket, str]]:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    path = str(Path(tempfile.gettempdir()) / f"cm-sock-{tag}")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(path)
    Path(path).chmod(0o777)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0cm-abstract-{tag}")
    for sock in (tcp, unix, abstract):
        sock.listen(8)
        sock.setblocking(False)
    try:
        yield tcp, unix, abstract, path
    finally:
        for sock in (tcp, unix, abstract):
            sock.close()
        Path(path).unlink(missing_ok=True)


def _accepted(sockets: tuple[socket.socket, ...]) -> int:
    count = 0
    for sock in sockets:
        with contextlib.suppress(BlockingIOError):
            conn, _ = sock.accept()
            conn.close()
            count += 1
    return count


def _host_state() -> set[str]:
    """What a call that got out of the sandbox would leave on the host: its mount points (this
    process is in the host's mount namespace) and pinned BPF objects."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    state = {f"mount {line.split()[4]}" for line in lines}
    with contextlib.suppress(OSError):
        state |= {f"bpf pin {name}" for name in os.listdir("/sys/fs/bpf")}
    return state


def observe(kind: str, tmp: Path) -> Observation:
    tag = uuid.uuid4().hex[:12]
    plain = kind == "plain user"
    user = ensure_plain_user() if plain and os.geteuid() == 0 else None
    owner = (user.pw_uid, user.pw_gid) if user else None
    seed = secrets.randbelow(10**17) + 10**17
    token = f"ghp_{tag}{secrets.token_hex(8)}"
    home = home_of(plain)
    other_run = Path(tempfile.mkdtemp(prefix="cm-run-"))
    other_run.chmod(0o755)
    payload_dir = Path(tempfile.mkdtemp(prefix="cm-payload-"))
    values = {
        "checkout": f"checkout-secret-{tag}",
        "home": f"home-secret-{tag}",
        "etc": f"etc-secret-{tag}",
        "other run": f"other-run-code-{tag}",
        "seed": str(seed),
        "token": token,
    }
    planted = {
        "checkout": ROOT / f".env.security-{tag}",
        "home": home / f".credentials-{tag}",
        "etc": Path(f"/etc/cm-security-{tag}"),
        "other run": other_run / "submission.py",
    }
    writes = [
        ROOT / f"planted-{tag}",
        home / f"planted-{tag}",
        Path(f"/etc/planted-{tag}"),
        other_run / f"planted-{tag}",
        Path(tempfile.gettempdir()) / f"planted-{tag}",
        Path("/dev/shm") / f"planted-{tag}",
    ]
    victim = _start_victim(kind)
    leave = f"cm-leave-{tag}"
    host_before = _host_state()
    try:
        for name, path in planted.items():
            if name != "etc" or os.access("/etc", os.W_OK):
                _plant(path, values[name], owner if name == "home" else None)
        with _listeners(tag) as (tcp, unix, abstract, unix_path):
            targets = {
                "files": [str(p) for p in planted.values()] + [str(payload_dir / "payload.txt")],
                "dirs": [str(payload_dir), str(other_run), str(home), str(ROOT), "/etc"],
                "needles": [values["seed"], token, "POPCORN_SEED"],
                "writes": [str(p) for p in writes] + [f"planted-{tag}.py"],
                "tcp": [5432, tcp.getsockname()[1]],
                "unix": [POSTGRES_SOCKET, unix_path, f"\0cm-abstract-{tag}"],
                "pids": [victim.pid, os.getpid()],
                "leave": leave,
            }
            task = small_task(tmp / f"task-{tag}")
            request = make_request(
                task, hostile_submission(targets), Mode.LEADERBOARD, seed=seed, limits=LIMITS
            )
            env = {"GITHUB_TOKENS": token, "DISCORD_TOKEN": token}
            result, stderr, payload = run_entrypoint(
                request, plain_user=plain, env=env, payload_dir=payload_dir
            )
            connections = _accepted((tcp, unix, abstract))
        time.sleep(0.2)  # a process that escaped would still be starting
        stdout = "\n".join(p.stdout for p in result.phases)
        return Observation(
            kind=kind,
            tag=tag,
            secrets=values,
            reports=reports(stdout),
            result_json=json.dumps(result.to_json()),
            runner_stderr=stderr,
            system=dict(result.system),
            verdict=result.verdict.value,
            payload_left=payload.exists(),
            planted_on_host=[str(p) for p in writes if p.exists()],
            victim_alive=victim.poll() is None,
            left_behind=processes_with(leave),
            listener_connections=connections,
            paths={name: str(path) for name, path in planted.items()},
            host_changes=sorted(_host_state() ^ host_before),
        )
    finally:
        victim.kill()
        victim.wait()
        for path in [*planted.values(), *writes, other_run, payload_dir]:
            remove(path)


@pytest.fixture(scope="module", params=KINDS)
def hostile_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    kind = request.param
    if kind == "root" and os.geteuid() != 0:
        pytest.skip("the root runner needs root")
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return observe(kind, tmp_path_factory.mktemp("security"))
    # The workers' temporary directories share a parent of this run, which pytest cleans up.
    cache = tmp_path_factory.getbasetemp().parent / f"cm-security-{kind.replace(' ', '-')}"
    with open(f"{cache}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.is_file():
            return Observation(**json.loads(cache.read_text("utf-8")))
        observation = observe(kind, tmp_path_factory.mktemp("security"))
        cache.write_text(json.dumps(asdict(observation)), encoding="utf-8")
        return observation
