"""Runs one untrusted process tree with a timeout, capped output and resource limits.

The child starts its own process group; on exit or timeout the whole group is killed, with
whatever escaped it (`lifecycle`). Where the machine allows, the tree runs in a cgroup of its
own (`cgroups`), joined before it runs anything, which caps memory of every kind and processes
as one; rlimits cap each process. The tree is wrapped in bubblewrap by the caller when the
sandbox is full (`sandbox.plan`), or isolated in-process (`namespaces`) when it is partial.
"""

from __future__ import annotations

import os
import resource
import select
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster_manager.sandbox import cgroups, lifecycle, seccomp
from cluster_manager.sandbox.namespaces import Isolation, enter_namespaces, switch_user

MAX_POLL_MS = 2**31 - 1  # poll() takes a C int of milliseconds: longer waits go in slices


class CappedBuffer:
    """Keeps the first and last `cap // 2` bytes of a stream: the start and the traceback."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        middle = f"\n[... {omitted} bytes omitted ...]\n".encode() if omitted > 0 else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


def _drain(stream: int, sink: CappedBuffer) -> threading.Thread:
    def pump() -> None:
        with os.fdopen(stream, "rb", buffering=0) as fh:
            while chunk := fh.read(65536):
                sink.write(chunk)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True)
class ResourceLimits:
    """rlimits of every process of a tree (the run's `core.models.Limits` decide them)."""

    memory_bytes: int | None = None
    file_bytes: int = 1 << 30
    open_files: int = 4096
    cpu_seconds: int | None = None  # per process; SIGKILL once used up
    processes: int | None = None  # RLIMIT_NPROC counts every process of the user: sandbox only
    group: cgroups.Caps | None = None  # the tree's cgroup, where the machine has a backend


def _set_limits(limits: ResourceLimits) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    if limits.memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.cpu_seconds is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    if limits.processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))


def _sandbox_child(
    limits: ResourceLimits, isolation: Isolation, cwd: Path, group: cgroups.Group | None
) -> Callable[[], None]:
    parent = os.getpid()
    join = cgroups.joiner(group)

    def preexec() -> None:
        join()  # first: nothing runs outside the cgroup
        if isolation.syscall_filter is not None:
            seccomp.rearm_in_child(isolation.syscall_filter)
        lifecycle.die_with_parent()
        _set_limits(limits)
        enter_namespaces(isolation)
        os.chdir(cwd)  # through the new mounts, if any
        if isolation.user is not None and isolation.switch_user:
            switch_user(*isolation.user, isolation.groups)
            lifecycle.die_with_parent()  # a change of credentials clears the parent-death signal
            if os.getppid() != parent:
                os._exit(1)  # the runner died before the signal was armed again

    return preexec


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None  # negative: killed by that signal; None: never finished
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    side_outputs: dict[str, str]  # what arrived on each side channel, by its variable name
    usage: cgroups.Usage | None = None  # what the tree's cgroup saw; None: it had none


def _wait_for_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Waits until `proc` exits (True) or `timeout` seconds pass (False), without reaping it.

    A pidfd wakes us the moment the child exits; `Popen.wait(timeout)` polls with sleeps of
    up to 50 ms, which every run would pay on top of its own time.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: fall back to polling
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()  # not select.select: a pidfd may be above FD_SETSIZE
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not poller.poll(min(max(deadline - time.monotonic(), 0.0) * 1000, MAX_POLL_MS)):
            if time.monotonic() >= deadline:
                return False
        return True
    finally:
        os.close(pidfd)


def _finish(
    proc: subprocess.Popen[bytes],
    timeout: float,
    isolation: Isolation,
    group: cgroups.Group | None = None,
) -> bool:
    """Waits up to `timeout` for the child to exit, then kills all it left behind. Returns
    whether it exited by itself."""
    lifecycle.running[proc.pid] = isolation
    exited = False
    try:
        exited = _wait_for_exit(proc, timeout)
    finally:
        if group is not None:
            group.kill()
        lifecycle.kill_user_of(isolation)
        lifecycle.kill_tree(proc.pid, keep=(proc.pid,))  # Popen reaps its own child
        proc.wait()
        lifecycle.running.pop(proc.pid, None)
    return exited


def run_tree(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    output_cap: int,
    limits: ResourceLimits,
    side_channels: Sequence[str] = (),
    side_channel_cap: int = 1 << 20,
    isolation: Isolation | None = None,
) -> ProcessResult:
    """Runs `command` and everything it starts; kills all of it by `timeout` seconds.

    Each name in `side_channels` becomes an environment variable holding the number of a
    pipe's write end, inherited by the child only (the popcorn result pipe).
    """
    isolation = isolation or Isolation()
    pipes: dict[str, tuple[int, int]] = {name: os.pipe() for name in side_channels}
    child_env = dict(env)
    for name, (_, write_end) in pipes.items():
        child_env[name] = str(write_end)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stdout, stderr = CappedBuffer(output_cap), CappedBuffer(output_cap)
    channels = {name: CappedBuffer(side_channel_cap) for name in side_channels}
    began = time.monotonic()
    group = _group(limits)
    proc = _spawn(
        command,
        cwd=cwd,
        env=child_env,
        outputs=(out_w, err_w),
        side_fds=[w for _, w in pipes.values()],
        limits=limits,
        isolation=isolation,
        group=group,
    )
    readers = [_drain(out_r, stdout), _drain(err_r, stderr)]
    readers += [_drain(pipes[name][0], channels[name]) for name in side_channels]
    timed_out = not _finish(proc, timeout, isolation, group)
    usage = group.close() if group is not None else None
    duration = time.monotonic() - began
    for reader in readers:
        reader.join(timeout=5)
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration_s=duration,
        stdout=stdout.text(),
        stderr=stderr.text(),
        side_outputs={name: buf.text() for name, buf in channels.items()},
        usage=usage,
    )


def _spawn(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    outputs: tuple[int, int],
    side_fds: list[int],
    limits: ResourceLimits,
    isolation: Isolation,
    group: cgroups.Group | None,
) -> subprocess.Popen[bytes]:
    """Starts the tree in a session of its own, writing to the `outputs` pipes (stdout,
    stderr) and inheriting `side_fds`. Our copies of those write ends close either way; the
    cgroup closes too if the tree never started."""
    try:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=outputs[0],
            stderr=outputs[1],
            pass_fds=side_fds + _filter_fds(isolation),
            start_new_session=True,
            preexec_fn=_sandbox_child(limits, isolation, cwd, group),
        )
    except BaseException:
        if group is not None:
            group.close()
        raise
    finally:
        # The child holds its copies; ours must close so readers see EOF when it exits.
        for fd in (*outputs, *side_fds):
            os.close(fd)


def _filter_fds(isolation: Isolation) -> list[int]:
    """The syscall filter's memfd, which bubblewrap reads by number in the child."""
    return [] if isolation.syscall_filter is None else [isolation.syscall_filter]


def _group(limits: ResourceLimits) -> cgroups.Group | None:
    """The tree's cgroup, made before it starts; None where the limits ask for none."""
    if limits.group is None:
        return None
    backend = cgroups.backend()
    if isinstance(backend, str):
        return None
    return backend.create(limits.group)
