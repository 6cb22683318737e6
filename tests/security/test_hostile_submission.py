"""A submission written by an attacker, on a root runner and on an ordinary user's runner.

Each test reads one family of the hostile run's findings (tests/security/conftest.py) and
asserts that the attack failed and that what it looked for is absent from every output the
user or the artifact gets. On a machine that cannot sandbox fully the run must say so, and
then its score must not be ranked (`test_partial_sandbox.py`).
"""

from __future__ import annotations

import pytest

from cluster_manager.core.sandboxing import FULL, SANDBOX_KEY
from tests.security.conftest import Observation

pytestmark = [pytest.mark.adversarial, pytest.mark.slow]


def _all(observation: Observation, family: str) -> list:
    assert observation.reports, f"the hostile submission never reported: {observation.verdict}"
    return [report[family] for report in observation.reports]


def _record(record_property, observation: Observation, text: str) -> None:
    record_property("observed", f"{observation.kind}: {text}")


@pytest.mark.reliability(
    "Sandbox",
    "running as root and as a plain user: is the sandbox full on this machine",
    "sandbox: full, the run passes",
)
def test_the_run_is_fully_sandboxed_and_still_passes(hostile_run: Observation, record_property):
    assert hostile_run.system.get(SANDBOX_KEY) == FULL, hostile_run.system
    assert hostile_run.verdict == "passed", hostile_run.result_json[-2000:]
    _record(record_property, hostile_run, f"sandbox {hostile_run.system.get(SANDBOX_KEY)}")


@pytest.mark.reliability(
    "Sandbox",
    "reading a planted 0644 file in the checkout (.env), in $HOME (.credentials) and in /etc",
    "none of them exists in the sandbox; their contents appear in no output",
)
def test_planted_secret_files_are_invisible(hostile_run: Observation, record_property):
    for files in _all(hostile_run, "files"):
        for name in ("checkout", "home", "etc"):
            assert files[hostile_run.paths[name]] is None, name
    _assert_no_secret_anywhere(hostile_run)
    _record(record_property, hostile_run, "checkout, home and /etc files: not found")


@pytest.mark.reliability(
    "Sandbox",
    "listing and reading the run request's payload file and its directory",
    "the payload is removed before the submission starts; its directory is not visible",
)
def test_the_payload_is_gone_and_its_directory_invisible(hostile_run: Observation, record_property):
    assert not hostile_run.payload_left
    for files in _all(hostile_run, "files"):
        assert not any(k.endswith("payload.txt") and v is not None for k, v in files.items())
    for listings in _all(hostile_run, "listings"):
        payload_dir = next(d for d in listings if "cm-payload-" in d)
        assert str(listings[payload_dir]).startswith("error"), listings[payload_dir]
    _record(record_property, hostile_run, "payload removed; its directory: not found")


@pytest.mark.reliability(
    "Sandbox",
    "reading another run's directory (0755, its submission 0644) and the host's home and checkout",
    "the other run is not visible; home and checkout show only the way to the interpreter",
)
def test_other_runs_and_host_directories_are_invisible(hostile_run: Observation, record_property):
    for files in _all(hostile_run, "files"):
        assert files[hostile_run.paths["other run"]] is None
    for listings in _all(hostile_run, "listings"):
        other_run = next(d for d in listings if "cm-run-" in d)
        assert str(listings[other_run]).startswith("error"), listings[other_run]
        # Home and checkout exist only as the way to the interpreter (say /root/.pyenv).
        for listing in listings.values():
            if isinstance(listing, list):
                assert not [n for n in listing if hostile_run.tag in n or n.startswith(".env")]
    _record(record_property, hostile_run, "other run, home, checkout: not found")


@pytest.mark.reliability(
    "Sandbox",
    "searching /proc (environ, cmdline, maps, cwd, fd of every process) for the seed and tokens",
    "only the run's own processes are listed; no seed, POPCORN_SEED or token found",
)
def test_the_secret_seed_is_not_in_proc(hostile_run: Observation, record_property):
    for proc in _all(hostile_run, "proc"):
        assert proc["hits"] == [], proc["hits"]
        assert len(proc["pids"]) < 40, proc["pids"]  # the host has hundreds
    for environ in _all(hostile_run, "environ"):
        assert environ == {}
    _assert_no_secret_anywhere(hostile_run)
    pids = max(len(p["pids"]) for p in _all(hostile_run, "proc"))
    _record(record_property, hostile_run, f"{pids} processes visible; nothing found")


@pytest.mark.reliability(
    "Sandbox",
    "writing into the checkout, $HOME, /etc, another run, the run directory, /tmp and /dev/shm",
    "nothing reaches the host; the run directory is read-only",
)
def test_writes_outside_the_run_never_reach_the_host(hostile_run: Observation, record_property):
    assert hostile_run.planted_on_host == []
    for writes in _all(hostile_run, "writes"):
        own = next(k for k in writes if k.endswith(".py"))
        assert writes[own].startswith("error"), writes[own]
    _record(record_property, hostile_run, "host untouched; run directory read-only")


@pytest.mark.reliability(
    "Sandbox",
    "connecting to TCP (the host's Postgres, a listener on loopback), a Unix socket file, the "
    "Postgres socket and an abstract Unix socket of the host",
    "every connection fails; no listener sees one",
)
def test_no_socket_of_the_host_is_reachable(hostile_run: Observation, record_property):
    for sockets in _all(hostile_run, "sockets"):
        assert all(v.startswith("error") for v in sockets.values()), sockets
    assert hostile_run.listener_connections == 0
    _record(record_property, hostile_run, "all refused or not found")


@pytest.mark.reliability(
    "Sandbox",
    "SIGKILL to a process of the runner's own user and to the test process, by their host pids",
    "neither is reached: both live on",
)
def test_signals_do_not_leave_the_sandbox(hostile_run: Observation, record_property):
    for signals in _all(hostile_run, "signals"):
        assert all(v.startswith("error") for v in signals.values()), signals
    assert hostile_run.victim_alive
    _record(record_property, hostile_run, "no such process; the victim lives")


@pytest.mark.reliability(
    "Sandbox",
    "leaving a double-forked daemon in a session of its own behind",
    "nothing of the run is alive after it",
)
def test_nothing_outlives_the_run(hostile_run: Observation, record_property):
    started = ("started", "started in the worker's group")
    assert all(leave in started for leave in _all(hostile_run, "leave"))
    assert hostile_run.left_behind == []
    _record(record_property, hostile_run, "daemon started, gone after the run")


def _assert_no_secret_anywhere(observation: Observation) -> None:
    """The RunResult (what the user and the artifact get) and the runner's log hold none."""
    for name, value in observation.secrets.items():
        assert value not in observation.result_json, name
        assert value not in observation.runner_stderr, name
