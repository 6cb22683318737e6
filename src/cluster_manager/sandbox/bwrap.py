"""Applies a `SandboxSpec` with bubblewrap (Debian/Ubuntu package `bubblewrap`).

bubblewrap builds a new root from the listed paths only, in new mount, PID, network, IPC and
UTS namespaces, and dies with its parent. As root it needs no user namespace, and the tree
switches to the run's own user with `setpriv` after the mounts; as an ordinary user it runs in
an unprivileged user namespace, which it then forbids the tree to nest. Either way the tree
runs behind the syscall filter of `seccomp` (no namespaces, mounts, tracing, io_uring...).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import PurePosixPath

from cluster_manager.sandbox import seccomp
from cluster_manager.sandbox.spec import SandboxSpec, View

NAMESPACES = (
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
PROBE_TIMEOUT_S = 10
BWRAP_SETTING = "CLUSTER_MANAGER_BWRAP"


def bwrap_path() -> str | None:
    """`CLUSTER_MANAGER_BWRAP` names another binary, or `off` to run without (partial)."""
    chosen = os.environ.get(BWRAP_SETTING, "bwrap")
    return None if chosen == "off" else shutil.which(chosen)


def setpriv_path() -> str | None:
    return shutil.which("setpriv")


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def _ancestors(view: View) -> list[str]:
    """Directories on the way to what is bound, which bubblewrap would create closed (0700):
    the sandbox user must pass through them, say /root on the way to a Python under it."""
    targets = [*view.read_only, *view.writable, *(t for t, _ in view.files)]
    covered = [*view.read_only, *(p for p, _ in view.symlinks), "/dev", "/proc"]
    found: set[str] = set()
    for target in targets:
        for parent in PurePosixPath(target).parents:
            path = str(parent)
            inside = any(_within(path, c) for c in covered)
            if path != "/" and path not in view.private and not inside:
                found.add(path)
    return sorted(found, key=lambda p: (_depth(p), p))


def _device_dirs(view: View) -> list[str]:
    """Directories under /dev holding bound nodes, which bubblewrap would create closed: the
    runtimes list /dev/dri to find their render nodes."""
    found = {
        str(parent)
        for target, _ in view.devices
        for parent in PurePosixPath(target).parents
        if _within(str(parent), "/dev") and str(parent) != "/dev"
    }
    return sorted(found, key=lambda p: (_depth(p), p))


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def argv(
    spec: SandboxSpec,
    *,
    bwrap: str,
    setpriv: str | None,
    as_root: bool,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The command line that runs a command (appended after it) inside `spec`, behind the
    syscall filter that `seccomp_fd` holds when there is one."""
    view = spec.view
    # No reaper of bwrap's as PID 1: it would keep the environment the tree started with
    # (the secret seed) readable to the tree's own user in /proc/1/environ.
    args = [bwrap, *NAMESPACES, "--as-pid-1", "--die-with-parent", "--new-session"]
    args += ["--hostname", spec.hostname]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if not as_root:
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    for path, target in view.symlinks:
        args += ["--symlink", target, path]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for path in sorted(view.private, key=_depth):
        args += ["--perms", "1777", "--size", str(view.private_bytes), "--tmpfs", path]
    # After the private directories: a checkout in /tmp needs its directory in the new /tmp.
    for directory in _ancestors(view):
        args += ["--perms", "0755", "--dir", directory]
    # Outer paths first, so an inner writable one (the run's HOME) is mounted over its
    # read-only parent; all after the private directories, since a run directory lives in one.
    binds = [(p, "--ro-bind") for p in view.read_only] + [(p, "--bind") for p in view.writable]
    for path, how in sorted(binds, key=lambda b: (_depth(b[0]), b[1] == "--bind")):
        args += [how, path, path]
    for target, source in view.files:
        args += ["--ro-bind", source, target]
    # After the binds: HOME and TMPDIR sit inside the read-only run directory.
    for path in view.scratch:
        args += ["--perms", "1777", "--size", str(view.private_bytes), "--tmpfs", path]
    for path in view.masked:  # inside the read-only binds: after them
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", path, "--remount-ro", path]
    for directory in _device_dirs(view):  # /dev/dri: open to the user, as on the host
        args += ["--perms", "0755", "--dir", directory]
    for target, device in view.devices:
        args += ["--dev-bind", device, target]
    # Last, once nothing more is mounted: the root and /dev that bubblewrap makes are tmpfs
    # mounts without a size, and on an ordinary user's runner they belong to the tree's user,
    # which could fill half the host's memory in each. Read-only, the only places it can
    # write are the sized tmpfs mounts above (device nodes still open for writing).
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args.append("--")
    if as_root and spec.user is not None:
        args += _leave_root(spec.user, spec.groups, setpriv)
    return args


def _leave_root(user: tuple[int, int], groups: Sequence[int], setpriv: str | None) -> list[str]:
    """The command, inside the sandbox, that makes the tree the run's own user, no capabilities
    and no new privileges."""
    if setpriv is None:
        raise FileNotFoundError("setpriv (util-linux) is needed to leave root in the sandbox")
    uid, gid = user
    listed = ",".join(str(g) for g in groups)
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        f"--groups={listed}" if listed else "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def probe(as_root: bool) -> str | None:
    """None if bubblewrap works here, else why not."""
    bwrap = bwrap_path()
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed or {BWRAP_SETTING} turns it off"
    return _probe(bwrap, as_root)


@functools.cache
def _probe(bwrap: str, as_root: bool) -> str | None:
    """Starts an empty sandbox behind the syscall filter, once per process and binary."""
    true = shutil.which("true") or "/bin/true"
    command = [bwrap, *NAMESPACES, "--die-with-parent"]
    if not as_root:
        command += ["--unshare-user", "--disable-userns"]
    shared = seccomp.shared_fd()
    fds = [] if shared is None else [seccomp.reopen(shared)]
    command += [arg for fd in fds for arg in ("--seccomp", str(fd))]
    command += ["--ro-bind", "/", "/", "--proc", "/proc", "--", true]
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False, pass_fds=fds
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        for fd in fds:
            os.close(fd)
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot start a sandbox here: {reason[-1] if reason else 'failed'}"
    return None
