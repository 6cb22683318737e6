"""One case on its ranks, run from the harness process: the steps each mode takes (a checked
call, the timed loop of a benchmark, a profile) and the calibration of the clocks they use.

Every output is checked here (`checks.py`), and every timed call is timed here as well, next
to the trusted echo (`witness.py`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import secrets
import socket
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.models import Case, Verdict
from cluster_manager.harness import timing, worker
from cluster_manager.harness.checks import Reference
from cluster_manager.harness.outcome import CaseFailed, Outcome
from cluster_manager.harness.witness import Calibration, ClockWitness
from cluster_manager.harness.workers import Echo, Workers

CALIBRATION_CALLS = 50
# A call that keeps the harness waiting lets its core idle: the reply takes longer to see than
# an empty call's (about 40 µs more on a 2-core VM). Real calls are calibrated on a busy wait.
CALIBRATION_BUSY_NS = 200_000
TRANSFER_SAMPLES = 5
_clock = time.perf_counter_ns


def world_size_of(case: Case) -> int | None:
    value = case.get("world_size")
    return value if protocol.is_integer(value) else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class TimedCall:
    window_ns: float  # rank 0's call as this process saw it: from `run` sent to duration read
    reported_ns: float  # rank 0's duration as its worker reported it
    replies: list[dict[str, Any]] = field(default_factory=list)  # outputs, when asked for
    output_ns: float = 0.0  # from the duration read to the last output read
    output_bytes: int = 0


class CaseRun:
    """One case on its ranks: every step goes to all of them, every output is checked here."""

    def __init__(self, workers: Workers, reference: Reference, args: Case) -> None:
        self.reference = reference
        self.args = args
        self.world_size = world_size_of(args)
        self.ranks = workers.ranks(self.world_size)
        self.calibration = workers.calibrations.get(self.world_size, Calibration())
        self._workers = workers

    @property
    def echo(self) -> Echo:
        return self._workers.echo  # started by the first timed case, not for tests

    def everywhere(self, step: str, *args: Any) -> list[dict[str, Any]]:
        self.send(step, *args)
        return self.decode(self.receive())

    def send(self, step: str, *args: Any) -> None:
        for process in self.ranks:
            process.send(step, *args)

    def receive(self) -> list[bytes]:
        """Every rank's reply: all are read, so none is left for the next step to find."""
        return [process.receive() for process in self.ranks]

    def decode(self, raw: list[bytes]) -> list[dict[str, Any]]:
        replies: list[dict[str, Any]] = []
        failures: list[tuple[int, CaseFailed]] = []
        for r, (process, data) in enumerate(zip(self.ranks, raw, strict=True)):
            try:
                replies.append(process.message(data))
            except CaseFailed as failed:
                failures.append((r, failed))
        if not failures:
            return replies
        if self.world_size is None:
            raise failures[0][1]
        outcomes = [(r, f.outcome) for r, f in failures]
        raise CaseFailed(
            Outcome(
                ok=False,
                error="\n".join(f"rank {r}: {o.error}" for r, o in outcomes),
                verdict=next((o.verdict for _, o in outcomes if o.verdict), None),
            ),
            worker_lost=any(f.worker_lost for _, f in failures),
        )

    def open(self, *, calibration: bool = False) -> None:
        port = _free_port() if self.world_size is not None else 0
        for r, process in enumerate(self.ranks):
            process.send("open", self.args, r, self.world_size, port, calibration)
        self.decode(self.receive())

    def close(self) -> None:
        with contextlib.suppress(CaseFailed):
            self.everywhere("close")

    def check(self, replies: list[dict[str, Any]], args: Case | None = None) -> str:
        """Checks every rank's output here; the messages of passing checks are kept."""
        messages = [
            self.reference.check(
                args or self.args, None if self.world_size is None else r, reply.get("output")
            )
            for r, reply in enumerate(replies)
        ]
        return "\n".join(m for m in messages if m)

    def timed_call(self, *, with_output: bool = False) -> TimedCall:
        """One timed call on every rank, with their outputs right after when asked for."""
        # Rank 0 last: the others already wait in its first barrier when its window opens.
        for process in self.ranks[1:]:
            process.send("run", with_output)
        began = _clock()
        self.ranks[0].send("run", with_output)
        first = self.ranks[0].receive()
        done = _clock()  # rank 0's call: the one whose duration is reported
        raw = [first] + [process.receive() for process in self.ranks[1:]]
        try:
            durations = [p.duration(data) for p, data in zip(self.ranks, raw, strict=True)]
        except CaseFailed as failed:
            # The ranks that did finish have their outputs on the way: out of step now.
            failed.worker_lost |= with_output and len(self.ranks) > 1
            raise
        call = TimedCall(window_ns=float(done - began), reported_ns=durations[0])
        if not with_output:
            return call
        outputs = self.receive()
        gap = float(_clock() - done)
        return replace(
            call, replies=self.decode(outputs), output_ns=gap, output_bytes=sum(map(len, outputs))
        )


def calibrate(workers: Workers, reference: Reference, world_sizes: set[int | None]) -> None:
    """Calibrates each world size the cases use (with the ranks' barriers when several)."""
    for world_size in sorted(world_sizes, key=lambda w: w or 0):
        case = CaseRun(workers, reference, {} if world_size is None else {"world_size": world_size})
        case.open(calibration=True)
        empty = [case.timed_call() for _ in range(CALIBRATION_CALLS)]
        case.everywhere("busy", CALIBRATION_BUSY_NS)
        busy = [case.timed_call() for _ in range(CALIBRATION_CALLS)]
        case.close()
        workers.calibrations[world_size] = Calibration.of_calls(
            empty=[call.reported_ns for call in empty],
            busy=[(call.window_ns, call.reported_ns) for call in busy],
            timer=world_size is None,
        )


def check_case(case: CaseRun) -> Outcome:
    return Outcome(ok=True, message=case.check(case.everywhere("call")))


def benchmark_case(case: CaseRun, *, recheck: bool, rule: timing.StopRule) -> Outcome:
    # One checked call first: it also triggers any JIT compilation for this shape.
    first = case.everywhere("call")
    case.check(first)
    case.everywhere("warm_up")
    witness = ClockWitness(case.calibration)
    timer_ns = case.calibration.timer_ns
    if recheck:
        outputs = [reply.get("output") for reply in first]
        witness.transfer_ns, witness.transfer_bytes = transfer_estimate(case.echo, outputs)
    nonce = secrets.randbits(64)
    seed = case.args.get("seed")
    fresh = recheck and protocol.is_integer(seed)

    def step(i: int) -> float:
        args = case.args
        if fresh:
            args = {**case.args, "seed": _iteration_seed(seed, nonce, i)}
            case.everywhere("prepare", args["seed"])
        call = case.timed_call(with_output=recheck)
        witness.add_call(call.window_ns, call.reported_ns, case.echo.round_trip())
        if recheck:
            witness.add_transfer(call.output_ns, call.output_bytes)
            case.check(call.replies, args)
        # What the timer adds to every call (0.5-1 µs on a CPU) is not the kernel's time.
        return max(call.reported_ns - timer_ns, 0.0)

    with _collections_paused():
        stats = timing.measure(step, rule)
    problem = witness.problem()
    if problem:
        return Outcome(ok=False, error=problem, verdict=Verdict.RUNTIME_ERROR)
    if recheck:
        # Ranked durations are held to this process's clock: forged reports count for little.
        stats = stats.shifted(witness.shortfall_ns() + witness.hidden_after_timer_ns())
    return Outcome(ok=True, stats=stats)


@contextlib.contextmanager
def _collections_paused() -> Iterator[None]:
    """No garbage collection stalls this process inside a timed call's window (a full one
    takes milliseconds once torch is loaded): what is alive now is frozen out of collections,
    which wait until the measurement is over."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def _iteration_seed(seed: Any, nonce: int, i: int) -> int:
    """Above the case's seed but unpredictable from it (or from the inputs, which may carry
    it): nothing can compute the next iteration's answer ahead, off the clock."""
    digest = hashlib.blake2b(f"{nonce}:{i}".encode(), digest_size=7).digest()
    return int(seed) + 1 + int.from_bytes(digest, "big")


def profile_case(case: CaseRun) -> Outcome:
    reply = case.everywhere("profile")[0]
    report = str(reply.get("report") or "")
    trace = str(reply.get("trace") or "")
    if not trace and reply.get("trace_bytes"):
        report += f"\n(the Chrome trace, {reply['trace_bytes']} bytes, is too big to send)"
    return Outcome(ok=True, report=report, trace=trace)


def transfer_estimate(echo: Echo, outputs: Sequence[Any]) -> tuple[float, int]:
    """How long honest workers need to send `outputs` here (encoding, the pipe) and their
    encoded size, timed on the case's first outputs in trusted processes: this one encodes,
    the echo sends the bytes when asked (one small round trip more than an output sent
    unasked). The yardstick for each later output's arrival. An untimed first round warms
    both up."""
    total_ns, total_bytes = 0.0, 0
    for output in outputs:
        samples: list[float] = []
        for _ in range(TRANSFER_SAMPLES + 1):
            began = _clock()
            data = worker.encode({"ok": True, "output": output})
            encoded = _clock() - began
            echo.hold(data)
            began = _clock()
            echo.give()
            samples.append(encoded + _clock() - began)
        total_ns += statistics.median(samples[1:])
        total_bytes += len(data)
    return total_ns, total_bytes
