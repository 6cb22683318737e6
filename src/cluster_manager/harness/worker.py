"""The submission's side of the built-in harness: a process forked by the zygote (`zygote.py`)
that imports the submission and does what the harness process asks, one step at a time.

Nothing this process says is trusted. It runs the kernel and reports what came out and how
long its own clock says the call took; the harness process (`evaluate.py`) makes every input
(this process never calls the task's generator, so hooking it moves no work off the clock),
checks every output, and holds the clock that decides whether a reported time can be true.
Replies are `torch.save` bytes, which the harness reads with
`torch.load(weights_only=True)`: tensors, numbers, strings and containers, never code; large
tensors follow them as raw frames (`frames.py`).
"""

from __future__ import annotations

import base64
import gc
import gzip
import io
import os
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from cluster_manager.core.models import Verdict
from cluster_manager.harness import cpu_waits, frames, guard, output_types, timing, wire
from cluster_manager.harness.ncu import NVTX_RANGE, PROFILER_ENV
from cluster_manager.harness.tensors import clone, compact, not_plain, to_device_of
from cluster_manager.harness.tracebacks import user_traceback
from cluster_manager.sandbox.lifecycle import die_with_parent, make_undumpable

MAX_ERROR_CHARS = 4000
# A timed call's duration: the nanoseconds and the request's token. Every reply echoes its
# request's random token: none can be sent ahead of it.
DONE = struct.Struct("<dQ")
# What a timed reply (`Timed`) starts with, before its duration: read as a reply's frame
# count, more than `frames.MAX_FRAMES`, so no other reply can begin this way.
TIMED_MARK = b"\xffTIMED\xff\xff"

# How allocators word running out of memory (torch CPU, CUDA, HIP).
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")
_clock = time.perf_counter_ns


@dataclass(frozen=True)
class Timed:
    """A timed call's duration and its output's reply, sent as one message: the harness
    sleeps until the whole call is done, so it never takes the CPU of the process it waits
    on halfway through (on one CPU its wake-up would preempt the worker, or the stand-in)."""

    duration: float
    reply: dict[str, Any]


# What a step sends back: a message, a timed call's duration in nanoseconds, or both.
Reply = dict[str, Any] | float | Timed
Steps = dict[str, Callable[..., Reply]]


def _torch() -> Any:
    import torch

    return torch


def encode(message: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    _torch().save(message, buffer)
    return buffer.getvalue()


def failure(exc: BaseException) -> dict[str, Any]:
    """The submission's exception as text: it is never re-raised or sent as an object."""
    text = user_traceback(exc)[-MAX_ERROR_CHARS:]
    lowered = str(exc).lower()
    oom = (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or any(marker in lowered for marker in _OOM_MARKERS)
    )
    verdict = Verdict.MEMORY_LIMIT if oom else Verdict.RUNTIME_ERROR
    return {"ok": False, "error": text, "verdict": verdict.value}


def _spin_for(ns: int) -> None:
    """Keeps this process's CPU busy for `ns`, as a process waiting on its kernel does (a CPU
    kernel computing, a CUDA or HIP synchronize spinning). Sleeping instead left the CPU idle
    and made the stand-in's replays a few microseconds quicker than honest calls moving the
    same data on a 2-core VM: every 100 µs call's clock read 3-12 % long."""
    end = _clock() + ns
    while _clock() < end:
        pass


class Worker:
    """State of the one case this process works on, and the steps the harness can ask for."""

    def __init__(self) -> None:
        torch = _torch()
        # Taken before the submission is imported: replacing torch.cuda.synchronize later must
        # not stop us waiting for the GPU.
        cuda = torch.cuda.is_available()
        self._cuda_synchronize: Callable[[], None] = (
            torch.cuda.synchronize if cuda else (lambda: None)
        )
        self._default_timer: timing.Timer = (
            timing.CudaEventTimer(torch, self._cuda_synchronize) if cuda else timing.CpuTimer()
        )
        self._kernel: Callable[[Any], Any] = lambda argument: None
        self._timer: timing.Timer = self._default_timer
        self._sync: Callable[[], None] = self._cuda_synchronize
        self._rank: int | None = None
        self._distributed = False
        self._data: Any = None
        self._argument: Any = None
        self._held: list[Any] = []  # a stand-in's outputs, one per rank
        self._holding = 0  # the rank whose output a stand-in's next call returns
        self._wait_ns = 0.0  # a stand-in's next call
        # A stand-in's run delay (`cpu_waits`) when its last call began: sent with its output.
        self._waits_at_start: int | None = None

    # --- steps ---------------------------------------------------------------------------

    def open(
        self, inputs: wire.Encoded | None, rank: int, world_size: int | None, port: int
    ) -> dict[str, Any]:
        """Imports the submission (once), joins the ranks' group and takes the case's inputs,
        made by the harness process."""
        self._distributed = world_size is not None
        self._rank = rank if self._distributed else None
        if self._distributed:
            self._join(rank, world_size or 1, port)
        from submission import custom_kernel  # type: ignore[import-not-found]

        self._kernel = custom_kernel
        self._data = wire.decode(inputs) if inputs is not None else None
        return {"ok": True}

    def call(self) -> dict[str, Any]:
        """One untimed call on a copy of the case's inputs; the output goes to the check."""
        output = self._kernel(clone(self._data))
        self._sync()
        return self._output_reply({"ok": True}, output)

    def warm_up(self) -> dict[str, Any]:
        data = clone(self._data)
        if self._distributed:
            # Ranks must make the same number of collective calls: a count, not a budget.
            timing.warm_up(lambda: self._kernel(clone(data)), self._sync, min_calls=3, budget_ns=0)
        else:
            timing.warm_up(lambda: self._kernel(data), self._sync)
        self._argument = clone(self._data)
        # A full collection of all that is loaded (torch alone: hundreds of thousands of
        # objects) takes milliseconds; timed calls should only pay for their own garbage.
        gc.collect()
        gc.freeze()
        return {"ok": True}

    def stand_in(self, outputs: list[Any]) -> dict[str, Any]:
        """Makes this worker the harness's stand-in for an honest submission: each timed call
        reads its inputs, waits as long as it is told and returns a copy of the output
        of the rank it stands in for (`outputs`: an honest output of the case per rank)."""
        self._held = list(outputs)
        self._kernel = self._wait_then_hold
        return {"ok": True}

    def run(
        self,
        inputs: wire.Encoded | None = None,
        with_output: bool = False,
        wait_ns: float = 0.0,
        rank: int = 0,
    ) -> Reply:
        """One timed call, on `inputs` when the harness sends fresh ones: its duration, with
        the output for the check in timed runs (one message). The harness times all of it
        from outside: taking the inputs, the call, the reply. `wait_ns` and `rank` are for a
        stand-in only, whose reply also says how long it had waited for a CPU when its call
        began."""
        if inputs is not None:
            self._argument = wire.decode(inputs)
        self._wait_ns = wait_ns
        self._holding = rank
        self._timer.start()
        output = self._kernel(self._argument)
        elapsed = self._timer.stop()
        if not with_output:
            return elapsed
        reply = self._output_reply({"ok": True}, output)
        if self._waits_at_start is not None and reply["ok"]:
            reply["waited_ns"] = self._waits_at_start
        return Timed(elapsed, reply)

    def _wait_then_hold(self, argument: Any) -> Any:
        """Reads the inputs and writes a fresh output, as a kernel would (what it leaves in the
        caches and the allocator weighs on the reply after it), then waits out the call on
        the wall clock, so a preemption does not lengthen it. The output lives where the
        inputs do, so it leaves the way a kernel's does (a GPU's output is copied to the host
        first); it is moved there once."""
        began = _clock()
        self._waits_at_start = cpu_waits.waited_ns()
        clone(argument)
        held = self._held[self._holding] = to_device_of(self._held[self._holding], argument)
        output = clone(held)
        _spin_for(int(self._wait_ns) - (_clock() - began))
        return output

    def profile(self) -> dict[str, Any]:
        torch = _torch()
        from torch.profiler import ProfilerActivity, profile

        self._kernel(clone(self._data))  # warm-up outside the trace
        self._sync()
        cuda = torch.cuda.is_available()
        if cuda and os.environ.get(PROFILER_ENV) == "ncu":
            return self._under_ncu(torch)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        argument = clone(self._data)
        with profile(activities=activities) as prof:
            self._kernel(argument)
            self._sync()
        sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=sort_by, row_limit=20)
        return {"ok": True, "report": table, **_chrome_trace(prof)}

    def guard(self, protected: list[int], groups: list[int]) -> dict[str, Any]:
        """Filters this process's syscalls before the submission is imported: nothing it
        runs can signal, trace or reschedule the `protected` processes, signal their `groups`
        or leave its own (`guard.py`)."""
        return {"ok": True, "guard": guard.protect(protected, groups)}

    def close(self) -> dict[str, Any]:
        if self._distributed:
            import torch.distributed as dist

            dist.destroy_process_group()
        self._timer = self._default_timer
        self._sync = self._cuda_synchronize
        self._data = self._argument = None
        gc.unfreeze()
        self._distributed = False
        return {"ok": True}

    # --- helpers -------------------------------------------------------------------------

    def _under_ncu(self, torch: Any) -> dict[str, Any]:
        """Nsight Compute is watching this process: one call inside the NVTX range it
        captures (the harness's own kernels stay outside it), and no torch profiler, which
        would fight ncu for the GPU's counters."""
        argument = clone(self._data)
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        try:
            self._kernel(argument)
            self._sync()
        finally:
            torch.cuda.nvtx.range_pop()
        return {"ok": True, "report": "captured by Nsight Compute: see the run's ncu report"}

    def _join(self, rank: int, world_size: int, port: int) -> None:
        torch = _torch()
        import torch.distributed as dist

        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(rank)
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
        )
        cuda_synchronize = self._cuda_synchronize

        def sync() -> None:
            cuda_synchronize()
            dist.barrier()

        self._sync = sync
        self._timer = timing.CpuTimer(sync)

    def _output_reply(self, reply: dict[str, Any], output: Any) -> dict[str, Any]:
        output = output_types.encode(output)
        problem = not_plain(output)
        if problem:
            return {"ok": False, "error": problem, "verdict": Verdict.WRONG_ANSWER.value}
        return {**reply, "output": compact(output)}


def serve(connection: Connection) -> None:
    """The worker's main loop: one request in, its reply out (a message, or a timed call's
    duration, with its output when asked for), until the harness hangs up."""
    die_with_parent()
    worker = Worker()
    steps: Steps = {
        "open": worker.open,
        "call": worker.call,
        "warm_up": worker.warm_up,
        "run": worker.run,
        "guard": worker.guard,
        "profile": worker.profile,
        "close": worker.close,
    }
    answer(connection, steps)


def serve_stand_in(connection: Connection) -> None:
    """The harness's stand-in: what an honest worker does around each timed call, on the same
    inputs and outputs, but never the submission's code. Undumpable, so the submission's
    processes (the same user) can neither trace it nor take its end of the pipe."""
    die_with_parent()
    make_undumpable()
    worker = Worker()
    steps: Steps = {  # no "open": it would import the submission
        "stand_in": worker.stand_in,
        "run": worker.run,
        "ping": lambda: 0.0,
    }
    answer(connection, steps)


def answer(connection: Connection, steps: Steps) -> None:
    """One request in, its reply out, until the other end hangs up."""
    while True:
        try:
            step, token, args = connection.recv()
            wire.receive_buffers(connection, args)
        except (EOFError, OSError):
            return
        try:
            reply = steps[step](*args)
        except BaseException as exc:
            reply = failure(exc)
        _send(connection, reply, token)


def _send(connection: Connection, reply: Reply, token: int) -> None:
    if isinstance(reply, float):
        connection.send_bytes(DONE.pack(reply, token))
        return
    duration = b""
    if isinstance(reply, Timed):
        duration, reply = TIMED_MARK + DONE.pack(reply.duration, token), reply.reply
    try:
        head, large = frames.split({**reply, "token": token})
        data = frames.header(large) + encode(head)
    except Exception as exc:  # e.g. an output torch.save cannot write
        data, large = frames.header([]) + encode({**failure(exc), "token": token}), []
    connection.send_bytes(duration + data)
    frames.send_frames(connection, large)


# A trace bigger than this (gzipped, base64) is left out: the result pipe of a whole phase
# holds 1 MiB, and a profile has one trace per benchmark case.
MAX_TRACE_CHARS = 96 * 1024


def _chrome_trace(prof: Any) -> dict[str, Any]:
    """The profile's Chrome trace (chrome://tracing, Perfetto), gzipped and base64-encoded,
    with its size; or only its size, when it is too big to send."""
    from pathlib import Path  # here: only a profile needs it, not every worker start

    with tempfile.TemporaryDirectory(prefix="cm-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        raw = path.read_bytes()
    encoded = base64.b64encode(gzip.compress(raw)).decode("ascii")
    return {"trace": encoded if len(encoded) <= MAX_TRACE_CHARS else "", "trace_bytes": len(raw)}
