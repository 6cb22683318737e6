"""What moving a case's data costs every timed call, next to what the pipe itself allows.

- `case_transfer_ms_16mib`: a timed call of the stand-in (a worker that never imports a
  submission) given fresh 16 MiB inputs and returning a 16 MiB output, as the largest shipped
  softmax case does: the harness's clock from sending `run` to the last output byte, less the
  call's reported duration, the median of `CALLS` calls. Ranked and benchmark calls pay it on
  both sides of every pair, and its noise is the noise of the harness's clock.
- `raw_pipe_ms_16mib` (informative): 16 MiB there and back over the same kind of pipe between
  two processes, written and read in place: the floor of the figure above on this machine.
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
import time
from multiprocessing.connection import Connection

import numpy
from benchlib import Figure, log, report

from cluster_manager.harness import case_run, rawio, wire, workers
from cluster_manager.harness.zygote import Zygote

SIZE = 16 << 20  # bytes each way
SHAPE = (SIZE // (4 * 8192), 8192)  # float32: SIZE bytes
CALLS = 40
WAIT_NS = 1e6  # the call's own duration, reported and left out
TARGET_MS = 15.0  # before frames and inputs travelled in place: 27 ms


def case_transfer() -> Figure:
    import torch  # here, not above: the suite imports every benchmark and needs no torch

    zygote = Zygote()
    stand_in = workers.StandIn(zygote)
    try:
        stand_in.send("stand_in", [torch.randn(SHAPE)])  # the output it returns, for rank 0
        stand_in.message(stand_in.receive())
        moved = []
        for _ in range(CALLS):
            inputs = wire.encode(torch.randn(SHAPE))
            call = case_run.time_call([stand_in], [inputs], with_output=True, wait_ns=WAIT_NS)
            stand_in.message(call.outputs[0])
            moved.append((call.window_ns - call.reported_ns + call.output_ns) / 1e6)
    finally:
        stand_in.stop()
        zygote.close()
    value = round(statistics.median(moved), 2)
    log(f"16 MiB there and back through a timed call: median {value} ms")
    spread = {"min_ms": round(min(moved), 2), "max_ms": round(max(moved), 2)}
    return Figure("case_transfer_ms_16mib", value, "ms", TARGET_MS, details=spread)


def _echo(connection: Connection) -> None:
    buffer = memoryview(numpy.empty(SIZE, dtype=numpy.uint8).data)
    for _ in range(CALLS):
        rawio.read_into(connection.fileno(), buffer)
        rawio.write_all(connection.fileno(), buffer)


def raw_pipe() -> Figure:
    ours, theirs = multiprocessing.Pipe()
    echo = multiprocessing.get_context("fork").Process(target=_echo, args=(theirs,))
    echo.start()
    sent = memoryview(numpy.ones(SIZE, dtype=numpy.uint8).data)
    back = memoryview(numpy.empty(SIZE, dtype=numpy.uint8).data)
    times = []
    for _ in range(CALLS):
        began = time.perf_counter_ns()
        rawio.write_all(ours.fileno(), sent)
        rawio.read_into(ours.fileno(), back)
        times.append((time.perf_counter_ns() - began) / 1e6)
    echo.join()
    value = round(statistics.median(times), 2)
    log(f"16 MiB there and back, pipe alone: median {value} ms")
    return Figure("raw_pipe_ms_16mib", value, "ms", None)


def main() -> int:
    figures = []
    for name, measure in (
        ("case_transfer_ms_16mib", case_transfer),
        ("raw_pipe_ms_16mib", raw_pipe),
    ):
        try:
            figures.append(measure())
        except Exception as exc:
            figures.append(Figure(name, None, "ms", None, error=repr(exc)))
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
