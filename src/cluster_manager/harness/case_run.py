"""One case on its ranks, from the harness process: every step goes to all of them, every
input is made here and every output checked here (`checks.py`), and a timed call is timed
here from outside, from the moment its inputs leave to the moment its output arrives. The
ranks run only while a step waits for them: each is stopped once its replies are in.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.models import Case
from cluster_manager.harness import wire
from cluster_manager.harness.checks import Reference
from cluster_manager.harness.frames import Received
from cluster_manager.harness.outcome import CaseFailed, Outcome, broken
from cluster_manager.harness.workers import Peer, StandIn, Workers

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
    window_ns: float  # from the first `run` sent to rank 0's reply read
    reported_ns: float  # rank 0's duration as its worker reported it
    outputs: list[Received] = field(default_factory=list)  # as sent, when asked for
    replies: list[dict[str, Any]] = field(default_factory=list)  # the outputs read
    output_ns: float = 0.0  # from rank 0's reply read to the other ranks' replies read
    # How long the trusted peers (a stand-in) had waited for a CPU when the call was sent.
    waited_before_ns: float = 0.0


def time_call(
    ranks: Sequence[Peer],
    inputs: Sequence[wire.Encoded | None],
    *,
    with_output: bool = False,
    wait_ns: float = 0.0,
    rank: int = 0,
) -> TimedCall:
    """One timed call on every rank, given fresh `inputs` (one per rank) when not None, with
    their outputs in the same reply when asked for; the ranks are stopped once all is read.
    The window opens before the first inputs leave: taking them is part of the call.
    `wait_ns` and `rank` are for the stand-in (how long to wait, whose output to return)."""
    waited = _trusted_waits(ranks)  # the ranks are stopped: nothing moves it now
    began = _clock()
    # Rank 0 last: the others already wait in its first barrier when it starts.
    for process, data in zip(ranks[1:], inputs[1:], strict=True):
        process.send("run", data, with_output, wait_ns, rank)
    ranks[0].send("run", inputs[0], with_output, wait_ns, rank)
    try:
        if with_output:
            return replace(_timed_replies(ranks, began), waited_before_ns=waited)
        return _durations(ranks, began)
    finally:
        for process in ranks:
            process.freeze()


def _trusted_waits(ranks: Sequence[Peer]) -> float:
    """How long the trusted ones among `ranks` have waited for a CPU so far."""
    return sum(process.waited_ns() for process in ranks)


def _durations(ranks: Sequence[Peer], began: int) -> TimedCall:
    first = ranks[0].receive()
    done = _clock()  # rank 0's call: the one whose duration is reported
    raw = [first] + [process.receive() for process in ranks[1:]]
    durations = [p.duration(data) for p, data in zip(ranks, raw, strict=True)]
    return TimedCall(window_ns=float(done - began), reported_ns=durations[0])


def _timed_replies(ranks: Sequence[Peer], began: int) -> TimedCall:
    try:
        first = ranks[0].receive_timed()
        done = _clock()  # rank 0's call: the one whose duration is reported
        timed = [first] + [process.receive_timed() for process in ranks[1:]]
    except CaseFailed as failed:
        # The ranks that did finish have their replies on the way: out of step now.
        failed.worker_lost |= len(ranks) > 1
        raise
    return TimedCall(
        window_ns=float(done - began),
        reported_ns=first[0],
        outputs=[reply for _, reply in timed],
        output_ns=float(_clock() - done),
    )


class CaseRun:
    """One case on its ranks: every step goes to all of them, every output is checked here."""

    def __init__(self, workers: Workers, reference: Reference, args: Case) -> None:
        self.reference = reference
        self.args = args
        self.world_size = world_size_of(args)
        self.ranks = workers.ranks(self.world_size)
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
        """Every rank's reply: all are read, so none is left for the next step to find; then
        the ranks are stopped until the next step."""
        try:
            return [process.receive() for process in self.ranks]
        finally:
            for process in self.ranks:
                process.freeze()

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

    def open(self) -> None:
        """Joins the ranks and hands each its inputs of the case, made here."""
        port = _free_port() if self.world_size is not None else 0
        for r, process in enumerate(self.ranks):
            process.send("open", self.inputs(self.args, r)[1], r, self.world_size, port)
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


def fresh_seeds(case: CaseRun) -> Callable[[int], Case]:
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


def _iteration_seed(seed: Any, nonce: int, i: int) -> int:
    """Above the case's seed but unpredictable from it (or from the inputs, which may carry
    it): nothing can compute the next iteration's answer ahead, off the clock. (The worker
    never sees it; a task's inputs may carry it, as some hold their seed.)"""
    digest = hashlib.blake2b(f"{nonce}:{i}".encode(), digest_size=7).digest()
    return int(seed) + 1 + int.from_bytes(digest, "big")
