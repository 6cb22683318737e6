"""The harness process's ends of the pipes: the submission's workers, one per rank, and the
stand-in that replays each timed call as an honest worker would.

Each of them leads a process group of its own, which runs only while the harness waits for it:
a request thaws it (SIGCONT), and the harness stops it (SIGSTOP) once it has what it asked
for (`ForkedPeer.freeze`). So nothing of the submission (no thread, no forked helper) runs
while the harness makes inputs, checks outputs or times the stand-in.

What a worker sends is read as data only (`torch.load(weights_only=True)`, large tensors as raw
frames: `frames.py`) and must echo its request's random token; anything else ends the case and
the worker with it.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import secrets
import signal
import time
from collections.abc import Sequence
from multiprocessing import resource_tracker
from multiprocessing.reduction import ForkingPickler
from typing import Any

from cluster_manager.core.models import Verdict
from cluster_manager.harness import cpu_waits, frames, wire, worker
from cluster_manager.harness.frames import FrameError, Received
from cluster_manager.harness.outcome import CaseFailed, Outcome, broken
from cluster_manager.harness.zygote import Zygote

_clock = time.perf_counter_ns


# --- what workers send ------------------------------------------------------------------------

_FAILURE_VERDICTS = {Verdict.RUNTIME_ERROR.value, Verdict.MEMORY_LIMIT.value}


def _parse(received: Received) -> dict[str, Any]:
    import torch

    try:
        message = torch.load(io.BytesIO(received.data), weights_only=True, map_location="cpu")
    except Exception as exc:
        raise broken(
            "the submission's process sent something other than plain tensors, numbers and "
            f"containers of them (outputs must be plain tensors): {_first_line(exc)}"
        ) from None
    if not isinstance(message, dict) or not isinstance(message.get("ok"), bool):
        raise broken("the submission's process sent a malformed reply")
    try:
        joined: dict[str, Any] = frames.join(message, received.frames)
    except FrameError as exc:
        raise broken(f"the submission's process sent a malformed reply: {exc}") from None
    return joined


def _first_line(exc: Exception) -> str:
    """torch.load's refusals run to a page of advice; the first line says what was refused."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _unwrap(message: dict[str, Any]) -> dict[str, Any]:
    """The reply itself, or the failure the worker reported as CaseFailed."""
    if message["ok"]:
        return message
    verdict = message.get("verdict")
    raise CaseFailed(
        Outcome(
            ok=False,
            error=str(message.get("error") or "failed"),
            verdict=Verdict(verdict) if verdict in _FAILURE_VERDICTS else None,
        )
    )


# --- the workers ------------------------------------------------------------------------------

# A request this small is written before its process is let run (`Peer.send`): well within
# what a connection's socket buffer holds (200 KiB by default on Linux), so the write never
# waits on a stopped reader.
WRITTEN_FIRST_BYTES = 16 * 1024


class Peer:
    """One end of a connection that speaks the worker's steps. Each request carries a random
    token its reply must echo: a reply sent ahead of its request, or an extra one, is caught."""

    def __init__(self, connection: multiprocessing.connection.Connection) -> None:
        self.connection = connection
        self._token = 0

    def send(self, step: str, *args: Any) -> None:
        self._token = secrets.randbits(64)
        request = ForkingPickler.dumps((step, self._token, args))
        # A request that fits the connection's buffer is written before the other end may
        # run: it wakes to find it whole, while this process goes to wait for the reply,
        # instead of waiting for this process to finish writing on a CPU they share.
        first = len(request) + wire.raw_size(args) <= WRITTEN_FIRST_BYTES
        try:
            if not first:
                self.thaw()
            self.connection.send_bytes(request)
            wire.send_buffers(self.connection, args)
        except OSError:
            raise _died() from None
        if first:
            self.thaw()

    def receive(self) -> Received:
        """A duration, or a reply with the frames that follow it (`frames.py`)."""
        data = self._read()
        return Received(data) if len(data) == worker.DONE.size else self._with_frames(data)

    def receive_timed(self) -> tuple[float, Received]:
        """A timed call's duration and its output's reply, one message (`worker.Timed`)."""
        data = self._read()
        mark, size = len(worker.TIMED_MARK), worker.DONE.size
        if data.startswith(worker.TIMED_MARK) and len(data) > mark + size:
            duration = self.duration(Received(data[mark : mark + size]))
            return duration, self._with_frames(data[mark + size :])
        # Not a timed reply: a failure in place of the call, or a duration or output alone.
        self.duration(Received(data) if len(data) == size else self._with_frames(data))
        raise broken("the submission's process sent a duration without its output")

    def _read(self) -> bytes:
        try:
            return self.connection.recv_bytes()
        except (EOFError, OSError):
            raise _died() from None

    def _with_frames(self, data: bytes) -> Received:
        try:
            return frames.receive(self.connection, data)
        except (EOFError, OSError):
            raise _died() from None
        except FrameError as exc:
            raise broken(f"the submission's process sent a malformed reply: {exc}") from None

    def thaw(self) -> None:
        """Lets the other end run (a process of its own does only while asked something)."""

    def freeze(self) -> None:
        """Stops the other end until the next request."""

    def waited_ns(self) -> float:
        """How long the other end has waited for a CPU so far, where it can be trusted to
        say (a stand-in); else 0."""
        return 0.0

    def message(self, received: Received) -> dict[str, Any]:
        if len(received.data) == worker.DONE.size:
            raise _out_of_turn()  # a duration where none was asked for
        message = _parse(received)
        if message.get("token") != self._token:
            raise _out_of_turn()
        return _unwrap(message)

    def duration(self, received: Received) -> float:
        data = received.data
        if len(data) != worker.DONE.size:
            self.message(received)  # raises the failure a worker sent in place of a duration
            raise broken("the submission's process sent no duration")
        value, token = worker.DONE.unpack(data)
        if token != self._token:
            raise _out_of_turn()
        if not value >= 0 or value == float("inf"):
            raise broken(f"the submission's process reported an impossible duration: {value}")
        return float(value)


class ForkedPeer(Peer):
    """A process of its own, forked by the zygote, at the other end of a fresh pipe."""

    ROLE = ""

    def __init__(self, zygote: Zygote) -> None:
        ours, theirs = multiprocessing.Pipe()
        super().__init__(ours)
        try:
            self.process = zygote.fork(self.ROLE, theirs)
        finally:
            theirs.close()

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def freeze(self) -> None:
        self._signal(signal.SIGSTOP)

    def _signal(self, signum: int) -> None:
        # The whole group: every thread and every process the submission started.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        self.process.kill()
        self.connection.close()


class WorkerProcess(ForkedPeer):
    """One worker, which imports the submission."""

    ROLE = "worker"


# How long a stopping stand-in is waited for (a loaded machine gives it a CPU within
# milliseconds; past that, its next replay leaves out one wait too many, which only raises the
# clock), and how often it is looked at meanwhile (not spinning: that would take the CPU it
# is waiting for).
STOP_WAIT_S = 1.0
STOP_POLL_S = 0.000_05


class StandIn(ForkedPeer):
    """The trusted stand-in for an honest worker: a process of its own like a worker's, so
    its calls cross the same pipe and wake the same way, which never imports the submission
    and is undumpable (nothing of the submission's can trace it or take its pipe)."""

    ROLE = "stand_in"

    def round_trip(self) -> float:
        """An empty step there and back: the way to a process as load makes it right now."""
        began = _clock()
        self.send("ping")
        self.duration(self.receive())
        return float(_clock() - began)

    def freeze(self) -> None:
        """Stops the stand-in and waits until it has: stopping wakes it, and under load that
        wake can wait for a CPU long after the call; counted in its next replay, it would
        be taken out of an overhead it was never part of."""
        super().freeze()
        deadline = time.monotonic() + STOP_WAIT_S
        while not cpu_waits.is_stopped(self.process.pid) and time.monotonic() < deadline:
            time.sleep(STOP_POLL_S)

    def waited_ns(self) -> float:
        return float(cpu_waits.waited_ns(self.process.pid))

    def waited_before_call(self, waited_at_request_ns: float, reply: dict[str, Any]) -> float:
        """How long the stand-in waited for a CPU from the request (`waited_at_request_ns`:
        its `waited_ns`, read while it was stopped, before the request was sent) to the start
        of its call (the same count, which its reply carries: `worker.Worker.run`)."""
        at_start = float(reply.get("waited_ns", waited_at_request_ns))
        return max(0.0, at_start - waited_at_request_ns)


def _out_of_turn() -> CaseFailed:
    return broken("the submission's process replied out of turn")


def _died() -> CaseFailed:
    return broken("the submission's process exited before returning a result")


def _no_resource_tracker() -> None:
    """multiprocessing starts a resource tracker with the first process or shared object a
    submission's worker makes: one more process of the submission's user, dumpable, outside
    the workers' filter. The harness shares no semaphores or memory by name, so the tracker
    gets /dev/null instead (it is alive to every probe) before the zygote forks, and is never
    started; what a submission registers is dropped, and the run's own tmpfs and cgroup go
    with the run."""
    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_fd", None) is None:
        setattr(tracker, "_fd", os.open(os.devnull, os.O_WRONLY))  # noqa: B010 - not in stubs


class Workers:
    """The submission's processes, one per rank, and (for timed modes) the stand-in, started
    first so that each worker can shut it out before it imports the submission. A worker that
    fails is replaced."""

    def __init__(self, size: int, *, timed: bool = True) -> None:
        _no_resource_tracker()
        self._zygote = Zygote()
        self._stand_in = StandIn(self._zygote) if timed else None
        self._processes = [self._started() for _ in range(size)]
        self.guarded = ""  # what the workers' own syscall filter got (`guard.py`)

    @property
    def stand_in(self) -> StandIn:
        if self._stand_in is None:
            raise RuntimeError("the stand-in is only started for timed modes")
        return self._stand_in

    def _started(self) -> WorkerProcess:
        process = WorkerProcess(self._zygote)
        process.send("guard", self._protected(), [os.getpgid(0)])
        self.guarded = str(process.message(process.receive()).get("guard", ""))
        return process

    def _protected(self) -> list[int]:
        """This process, the zygote and the stand-in."""
        pids = [os.getpid(), self._zygote.pid]
        if self._stand_in is not None:
            pids.append(self._stand_in.process.pid)
        return [pid for pid in pids if pid > 0]

    def ranks(self, world_size: int | None) -> list[WorkerProcess]:
        wanted = world_size or 1
        while len(self._processes) < wanted:
            self._processes.append(self._started())
        return self._processes[:wanted]

    def replace(self, ranks: Sequence[WorkerProcess]) -> None:
        for i, process in enumerate(self._processes):
            if process in ranks:
                process.stop()
                self._processes[i] = self._started()

    def close(self) -> None:
        """Kills the workers: the submission's threads could keep one alive long after its
        results are in."""
        for process in self._processes:
            process.stop()
        if self._stand_in is not None:
            self._stand_in.stop()
        self._zygote.close()
