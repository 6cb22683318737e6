"""A submission that tries every way out of the sandbox at import, then computes honestly.

It reports what it reached as one `HOSTILE {json}` line per import; the tests read those
lines from the run's output and check the host afterwards.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

REPORT_PREFIX = "HOSTILE "

_PROBES = r'''
import json, os, signal, socket, subprocess

TARGETS = json.loads(__TARGETS__)


def _read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 20)
    except OSError:
        return None


def _files():
    found = {}
    for path in TARGETS["files"]:
        data = _read(path)
        found[path] = None if data is None else data.decode(errors="replace")[:200]
    return found


def _listings():
    found = {}
    for directory in TARGETS["dirs"]:
        try:
            found[directory] = sorted(os.listdir(directory))[:50]
        except OSError as exc:
            found[directory] = "error: " + exc.strerror
    return found


def _proc():
    hits, pids = [], []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        pids.append(int(pid))
        for what in ("environ", "cmdline", "maps"):
            data = _read(f"/proc/{pid}/{what}") or b""
            hits += [f"{pid}/{what}: {n}" for n in TARGETS["needles"] if n.encode() in data]
        links = []
        for name in ("cwd", "root", "exe"):
            try:
                links.append(os.readlink(f"/proc/{pid}/{name}"))
            except OSError:
                pass
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = []
        for fd in fds:
            try:
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
        hits += [f"{pid} link: {link}" for link in links if "payload" in link]
    return {"hits": hits, "pids": sorted(pids)}


def _writes():
    found = {}
    for path in TARGETS["writes"]:
        try:
            with open(path, "w") as fh:
                fh.write("planted")
            found[path] = "written"
        except OSError as exc:
            found[path] = "error: " + exc.strerror
    return found


def _connect(family, address):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(1)
    try:
        sock.connect(address)
        return "connected"
    except OSError as exc:
        return "error: " + (exc.strerror or type(exc).__name__)
    finally:
        sock.close()


def _sockets():
    found = {}
    for port in TARGETS["tcp"]:
        found[f"tcp {port}"] = _connect(socket.AF_INET, ("127.0.0.1", port))
    for path in TARGETS["unix"]:
        found[f"unix {path!r}"] = _connect(socket.AF_UNIX, path)
    return found


def _signals():
    found = {}
    for pid in TARGETS["pids"]:
        try:
            os.kill(pid, signal.SIGKILL)
            found[str(pid)] = "sent"
        except OSError as exc:
            found[str(pid)] = "error: " + exc.strerror
    return found


def _leave_behind():
    """A daemon in a session of its own, double-forked, that would outlive the run."""
    subprocess.Popen(
        ["sh", "-c", f"(sleep 600 {TARGETS['leave']} &) ; exit 0"],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).wait()
    return "started"


REPORT = {
    "files": _files(),
    "listings": _listings(),
    "proc": _proc(),
    "writes": _writes(),
    "sockets": _sockets(),
    "signals": _signals(),
    "environ": {k: v for k, v in os.environ.items() if any(n in v for n in TARGETS["needles"])},
    "leave": _leave_behind(),
}
print(__PREFIX__ + json.dumps(REPORT), flush=True)


def custom_kernel(data):
    return data.clone()
'''


def hostile_submission(targets: dict[str, Any]) -> str:
    code = _PROBES.replace("__TARGETS__", repr(json.dumps(targets)))
    return textwrap.dedent(code.replace("__PREFIX__", repr(REPORT_PREFIX)))


def reports(stdout: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(REPORT_PREFIX) :])
        for line in stdout.splitlines()
        if line.startswith(REPORT_PREFIX)
    ]
