"""One case on its ranks, run from the harness process: the steps each mode takes (a checked
call, the timed loop of a benchmark, a profile) and the calibration of the clocks they use.

Every input is made here and every output checked here (`checks.py`); every timed call is
timed here as well and, on a single rank, replayed by the trusted stand-in (`witness.py`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.models import Case, Verdict
from cluster_manager.harness import retiming, timing, wire
from cluster_manager.harness.checks import Reference
from cluster_manager.harness.frames import Received
from cluster_manager.harness.outcome import CaseFailed, Outcome, broken
from cluster_manager.harness.witness import (
    PAIRED_MIN_CALLS,
    Calibration,
    ClockWitness,
    PairedWitness,
)
from cluster_manager.harness.workers import Peer, StandIn, Workers

CALIBRATION_CALLS = 50
# A call that keeps the harness waiting lets its core idle: the reply takes longer to see than
# an empty call's (about 40 µs more on a 2-core VM). Real calls are calibrated on a busy wait.
CALIBRATION_BUSY_NS = 200_000
# proc(5): /proc/PID/stat's "processor", the CPU last run on, counted after the ")" that
# ends the command name.
PROCESSOR_FIELD = 36
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
    outputs: list[Received] = field(default_factory=list)  # as sent, when asked for
    replies: list[dict[str, Any]] = field(default_factory=list)  # the outputs read
    output_ns: float = 0.0  # from the duration read to the last output read


def time_call(
    ranks: Sequence[Peer],
    inputs: Sequence[wire.Encoded | None],
    *,
    with_output: bool = False,
    wait_ns: float = 0.0,
) -> TimedCall:
    """One timed call on every rank, given fresh `inputs` (one per rank) when not None, with
    their outputs right after when asked for. The window opens before the inputs leave: taking
    them is part of what this process sees of the call."""
    # Rank 0 last: the others already wait in its first barrier when its window opens.
    for process, data in zip(ranks[1:], inputs[1:], strict=True):
        process.send("run", data, with_output, wait_ns)
    began = _clock()
    ranks[0].send("run", inputs[0], with_output, wait_ns)
    first = ranks[0].receive()
    done = _clock()  # rank 0's call: the one whose duration is reported
    raw = [first] + [process.receive() for process in ranks[1:]]
    try:
        durations = [p.duration(data) for p, data in zip(ranks, raw, strict=True)]
    except CaseFailed as failed:
        # The ranks that did finish have their outputs on the way: out of step now.
        failed.worker_lost |= with_output and len(ranks) > 1
        raise
    call = TimedCall(window_ns=float(done - began), reported_ns=durations[0])
    if not with_output:
        return call
    outputs = [process.receive() for process in ranks]
    return replace(call, outputs=outputs, output_ns=float(_clock() - done))


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
    def stand_in(self) -> StandIn:
        return self._workers.stand_in  # started by the first timed case, not for tests

    def everywhere(self, step: str, *args: Any) -> list[dict[str, Any]]:
        self.send(step, *args)
        return self.decode(self.receive())

    def send(self, step: str, *args: Any) -> None:
        for process in self.ranks:
            process.send(step, *args)

    def receive(self) -> list[Received]:
        """Every rank's reply: all are read, so none is left for the next step to find."""
        return [process.receive() for process in self.ranks]

    def decode(self, raw: list[Received]) -> list[dict[str, Any]]:
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
        """Joins the ranks and hands each its inputs of the case, made here."""
        port = _free_port() if self.world_size is not None else 0
        for r, process in enumerate(self.ranks):
            inputs = None if calibration else self.inputs(self.args, r)[1]
            process.send("open", inputs, r, self.world_size, port, calibration)
        self.decode(self.receive())

    def inputs(self, args: Case, r: int) -> tuple[Any, wire.Encoded]:
        """Rank `r`'s inputs for `args`, generated here, and as the worker is sent them."""
        data = self.reference.generate(args, None if self.world_size is None else r)
        try:
            return data, wire.encode(data)
        except Exception as exc:
            raise broken(f"the task's inputs cannot be sent to the submission: {exc}") from None

    def close(self) -> None:
        with contextlib.suppress(CaseFailed):
            self.everywhere("close")

    def check(
        self,
        replies: list[dict[str, Any]],
        args: Case | None = None,
        data: Sequence[Any] | None = None,
    ) -> str:
        """Checks every rank's output here (against `data`, the inputs made here for the call,
        when given); the messages of passing checks are kept."""
        if len(replies) != len(self.ranks):  # every rank's output, or the case is not checked
            raise broken(f"{len(replies)} output(s) to check from {len(self.ranks)} rank(s)")
        messages = [
            self.reference.check(
                args or self.args,
                None if self.world_size is None else r,
                reply.get("output"),
                None if data is None else data[r],
            )
            for r, reply in enumerate(replies)
        ]
        return "\n".join(m for m in messages if m)

    def timed_call(
        self, inputs: Sequence[wire.Encoded | None] | None = None, *, with_output: bool = False
    ) -> TimedCall:
        """One timed call on every rank (on fresh `inputs` when given), its outputs read."""
        call = time_call(self.ranks, inputs or [None] * len(self.ranks), with_output=with_output)
        return replace(call, replies=self.decode(call.outputs)) if with_output else call


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


def benchmark_case(
    case: CaseRun,
    *,
    recheck: bool,
    rule: timing.StopRule,
    retimings: retiming.Retimings | None = None,
) -> Outcome:
    # One checked call first: it also triggers any JIT compilation for this shape.
    first = case.everywhere("call")
    case.check(first)
    case.everywhere("warm_up")
    if case.world_size is None:
        output = first[0].get("output")
        return _paired_case(case, output, rule, retimings or retiming.Retimings(0), ranked=recheck)
    witness = ClockWitness(case.calibration)
    timer_ns = case.calibration.timer_ns
    fresh = _fresh_seeds(case) if recheck else None

    def step(i: int) -> float:
        args, data, inputs = case.args, None, None
        if fresh is not None:
            args = fresh(i)
            made = [case.inputs(args, r) for r in range(len(case.ranks))]
            data, inputs = [d for d, _ in made], [raw for _, raw in made]
        call = case.timed_call(inputs, with_output=recheck)
        witness.add_call(call.window_ns, call.reported_ns, case.stand_in.round_trip())
        if recheck:
            case.check(call.replies, args, data)
        # What the timer adds to every call (0.5-1 µs on a CPU) is not the kernel's time.
        return max(call.reported_ns - timer_ns, 0.0)

    with _collections_paused():
        stats = timing.measure(step, rule)
    problem = witness.problem()
    if problem:
        return Outcome(ok=False, error=problem, verdict=Verdict.RUNTIME_ERROR)
    return Outcome(ok=True, stats=stats)


def _paired_case(
    case: CaseRun,
    output: Any,
    rule: timing.StopRule,
    retimings: retiming.Retimings,
    *,
    ranked: bool = False,
) -> Outcome:
    """The timed loop of one rank, the same in benchmark and ranked runs (so a ranked time is
    what the benchmark showed): every timed call on fresh inputs made here, checked here, and
    replayed right before or after by the stand-in, which takes the same inputs, waits as long
    as the submission reported last and returns an output of the same size. Durations count
    as reported: the run fails instead if the submission's calls took longer around its
    reports than the stand-in's, beyond what noise explains (`PairedWitness`), in this timing
    and, when `retimings` allows one, in another. A `ranked` timing with too few pairs, or
    too noisy, to judge is not scored."""
    stand_in = case.stand_in
    stand_in.send("stand_in", output)
    stand_in.message(stand_in.receive())
    began = _clock()
    stats, witness = _paired_timing(case, rule, settle=ranked)
    problem = witness.problem()
    if (problem or (ranked and witness.too_noisy())) and retimings.take():
        # The share kept free for it (`Harness.run_benchmarks`), and what the first timing
        # left of the case's time for the witness's pairs.
        left_ns = max(0.0, rule.floor_budget_ns - (_clock() - began))
        again_rule = replace(rule, floor_budget_ns=rule.wall_budget_ns + left_ns)
        stats, again = _paired_timing(case, again_rule, settle=ranked)
        # A flagged timing needs a clearly clean second one; one too noisy to judge, a
        # second that can judge, whichever way it does.
        settled = problem is None and again.problem() is None and retiming.judges(again)
        if retiming.clears(again, ranked=ranked) or settled:
            problem, witness = None, again
        elif problem is None:
            problem = again.problem()
    if problem:
        return Outcome(ok=False, error=problem, verdict=Verdict.RUNTIME_ERROR)
    if ranked and witness.pairs < PAIRED_MIN_CALLS:
        return Outcome(
            ok=False, error=retiming.too_few_pairs(witness, stats), verdict=Verdict.TIMEOUT
        )
    if ranked and witness.too_noisy():
        return Outcome(ok=False, error=retiming.too_noisy(witness, stats), verdict=Verdict.TIMEOUT)
    return Outcome(ok=True, stats=stats)


def _paired_timing(
    case: CaseRun, rule: timing.StopRule, *, settle: bool = False
) -> tuple[timing.Stats, PairedWitness]:
    """One timing of the case, call by call against the stand-in's replays, and the witness
    that holds what the pairs showed. With `settle` (ranked), it goes on while the pairs are
    too noisy to judge, within the rule's floor budget."""
    stand_in = case.stand_in
    witness = PairedWitness(case.calibration)
    timer_ns = case.calibration.timer_ns
    fresh = _fresh_seeds(case)

    last_ns = 0.0  # the stand-in waits as long as the submission's last call reported

    def replay(inputs: wire.Encoded) -> TimedCall:
        replayed = time_call([stand_in], [inputs], with_output=True, wait_ns=last_ns)
        stand_in.message(replayed.outputs[0])
        return replayed

    worker_pid, stand_in_pid = case.ranks[0].process.pid, stand_in.process.pid

    def step(i: int) -> float:
        nonlocal last_ns
        args = fresh(i)
        data, inputs = case.inputs(args, 0)
        _follow(stand_in_pid, worker_pid)
        # Which goes first is a coin's toss: whatever favours one place in the order (the
        # harness's own time slice running out, caches) weighs on both alike.
        early = replay(inputs) if secrets.randbits(1) else None
        call = case.timed_call([inputs], with_output=True)
        last_ns = call.reported_ns
        late = replay(inputs) if early is None else early
        witness.add(
            (call.window_ns, call.reported_ns, call.output_ns),
            (late.window_ns, late.reported_ns, late.output_ns),
        )
        case.check(call.replies, args, [data])
        return max(call.reported_ns - timer_ns, 0.0)

    with _collections_paused():
        stats = timing.measure(step, rule, unsettled=witness.too_noisy if settle else None)
    if stand_in_pid:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(stand_in_pid, os.sched_getaffinity(0))
    return stats, witness


def _fresh_seeds(case: CaseRun) -> Callable[[int], Case]:
    """Each timed iteration's arguments: the case's, with a seed of its own that nothing can
    predict (drawn here, never sent to the submission). A case without a seed gets one when
    the task's generator takes one; otherwise its inputs are made anew each time, alike."""
    seed = case.args.get("seed")
    if not protocol.is_integer(seed):
        if not case.reference.takes_seed():
            return lambda i: case.args
        seed = 0
    nonce = secrets.randbits(64)
    return lambda i: {**case.args, "seed": _iteration_seed(seed, nonce, i)}


def _follow(stand_in: int | None, worker: int | None) -> None:
    """Moves the stand-in to the CPU the worker last ran on: a wake-up on a busy CPU waits for
    it, so two processes that live on different CPUs see different delays under load, which
    the pairing would take for hidden work. The worker (and the kernel's threads) stay free."""
    if not stand_in or not worker:
        return
    try:
        stat = Path(f"/proc/{worker}/stat").read_text()
        cpu = int(stat.rsplit(")", 1)[1].split()[PROCESSOR_FIELD])
        if cpu in os.sched_getaffinity(0):
            os.sched_setaffinity(stand_in, {cpu})
    except (OSError, ValueError, IndexError):
        pass  # the worker is gone, or the CPU is not ours: the pairing goes on as it is


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
    it): nothing can compute the next iteration's answer ahead, off the clock. (The worker
    never sees it; a task's inputs may carry it, as some hold their seed.)"""
    digest = hashlib.blake2b(f"{nonce}:{i}".encode(), digest_size=7).digest()
    return int(seed) + 1 + int.from_bytes(digest, "big")


def profile_case(case: CaseRun) -> Outcome:
    reply = case.everywhere("profile")[0]
    report = str(reply.get("report") or "")
    trace = str(reply.get("trace") or "")
    if not trace and reply.get("trace_bytes"):
        report += f"\n(the Chrome trace, {reply['trace_bytes']} bytes, is too big to send)"
    return Outcome(ok=True, report=report, trace=trace)
