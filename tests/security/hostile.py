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
    """A daemon in a session of its own (where the process may make one: a harness worker may
    not), double-forked, that would outlive the run."""
    command = ["sh", "-c", f"(sleep 600 {TARGETS['leave']} &) ; exit 0"]
    quiet = dict.fromkeys(("stdin", "stdout", "stderr"), subprocess.DEVNULL)
    try:
        subprocess.Popen(command, start_new_session=True, **quiet).wait()
    except PermissionError:
        subprocess.Popen(command, **quiet).wait()
        return "started in the worker's group"
    return "started"


# The calls a sandbox must refuse, by number: the submission carries its own table.
_NUMBERS = {
    "x86_64": {"ptrace": 101, "pidfd_open": 434, "pidfd_getfd": 438, "io_uring_setup": 425,
               "userfaultfd": 323, "bpf": 321, "perf_event_open": 298, "unshare": 272,
               "clone": 56, "mount": 165},
    "aarch64": {"ptrace": 117, "pidfd_open": 434, "pidfd_getfd": 438, "io_uring_setup": 425,
                "userfaultfd": 282, "bpf": 280, "perf_event_open": 241, "unshare": 97,
                "clone": 220, "mount": 40},
}.get(os.uname().machine, {})
CLONE_NEWNS, CLONE_NEWUSER, SIGCHLD = 0x20000, 0x10000000, 17


def _syscall(name, *args):
    """The call's result: 'ok' (its descriptor closed) or the errno's name."""
    import ctypes, errno
    libc = ctypes.CDLL(None, use_errno=True)
    wide = [a if isinstance(a, (bytes, ctypes.Array)) else ctypes.c_long(a) for a in args]
    result = libc.syscall(ctypes.c_long(_NUMBERS[name]), *wide)
    if result < 0:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return result


def _named(result):
    if isinstance(result, str):
        return result
    if result > 2:
        os.close(result)
    return "ok"


def _in_child(probe):
    """`probe` in a forked child, whose namespaces and tracees die with it."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_end, str(probe()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        answer = fh.read().decode()
    os.waitpid(pid, 0)
    return answer


def _sleeper():
    pid = os.fork()
    if pid == 0:
        import time
        time.sleep(30)
        os._exit(0)
    return pid


def _attach(target):
    found = _syscall("ptrace", 16, target, 0, 0)  # PTRACE_ATTACH
    if found == 0:
        os.waitpid(target, 0)
        _syscall("ptrace", 17, target, 0, 0)  # PTRACE_DETACH
    return _named(found)


def _clone_namespaces():
    child = _syscall("clone", CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0)
    if child == 0:
        os._exit(0)
    if not isinstance(child, str):
        os.waitpid(child, 0)
        return "ok"
    return child


def _mount_tmpfs():
    _syscall("unshare", CLONE_NEWUSER | CLONE_NEWNS)  # where it works, mount would too
    return _named(_syscall("mount", b"none", b"/tmp", b"tmpfs", 0, 0))


def _syscalls():
    """Each call the sandbox must refuse, tried once; 'ok' where it went through."""
    import ctypes, struct
    if not _NUMBERS:
        return {"machine": os.uname().machine}
    found = {}
    sibling = _sleeper()
    try:
        found["ptrace"] = _in_child(lambda: _attach(sibling))
        pidfd = _syscall("pidfd_open", sibling, 0)
        found["pidfd_open"] = "ok" if isinstance(pidfd, int) else pidfd
        source = pidfd if isinstance(pidfd, int) else -1
        found["pidfd_getfd"] = _named(_syscall("pidfd_getfd", source, 0, 0))
        if isinstance(pidfd, int):
            os.close(pidfd)
    finally:
        os.kill(sibling, signal.SIGKILL)
        os.waitpid(sibling, 0)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    found["io_uring_setup"] = _named(_syscall("io_uring_setup", 1, params))
    found["userfaultfd"] = _named(_syscall("userfaultfd", os.O_CLOEXEC | 1))  # user-mode only
    # BPF_OBJ_GET of a pin that does not exist: ENOENT where the kernel sees the call.
    path = ctypes.create_string_buffer(b"/sys/fs/bpf/cm-missing")
    attr = ctypes.create_string_buffer(struct.pack("QII", ctypes.addressof(path), 0, 0), 16)
    found["bpf"] = _named(_syscall("bpf", 7, attr, 16))
    # A software counter of this process, user space only: allowed unprivileged.
    event = struct.pack("IIQQQQQIIQ", 1, 64, 1, 0, 0, 0, 1 | 1 << 5 | 1 << 6, 0, 0, 0)
    found["perf_event_open"] = _named(
        _syscall("perf_event_open", ctypes.create_string_buffer(event, 64), 0, -1, -1, 8)
    )
    found["unshare user"] = _in_child(lambda: _named(_syscall("unshare", CLONE_NEWUSER)))
    found["clone newuser newns"] = _in_child(_clone_namespaces)
    found["mount"] = _in_child(_mount_tmpfs)
    # A missing mount point: ENOENT where the kernel looks the path up.
    found["mount missing"] = _named(_syscall("mount", b"none", b"/cm-missing", b"tmpfs", 0, 0))
    return found


def _kernel_views():
    """What the host's /proc and /sys tell: boot line, memory use, interfaces, cgroups."""
    views = {"cmdline": (_read("/proc/cmdline") or b"").decode(errors="replace")}
    meminfo = (_read("/proc/meminfo") or b"").decode(errors="replace")
    views["meminfo"] = {
        line.split(":")[0]: int(line.split()[1]) for line in meminfo.splitlines() if ":" in line
    }
    for directory in ("/sys/class/net", "/sys/fs/cgroup", "/sys/firmware", "/sys/kernel"):
        try:
            views[directory] = sorted(os.listdir(directory))
        except OSError as exc:
            views[directory] = "error: " + exc.strerror
    interfaces = []
    for root, dirs, _ in os.walk("/sys"):
        if os.path.basename(root) == "net":
            interfaces += [os.path.join(root, name) for name in dirs]
    views["interfaces"] = sorted(interfaces)
    return views


REPORT = {
    "syscalls": _syscalls(),
    "kernel": _kernel_views(),
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
