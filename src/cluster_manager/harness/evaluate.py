"""The built-in eval harness: `python -m cluster_manager.harness.evaluate MODE TESTS_FILE`.

It speaks the popcorn protocol like the public problem sets' `eval.py`, with these guarantees:
- This process holds the result pipe, the secret seed, the reference and the clock; it never
  imports the submission. Workers (`worker.py`, spawned) import it and get neither the pipe
  (not inherited) nor the seed (removed from the environment before they start): they see only
  the per-case seeds already mixed with it, and each timed iteration's seed only when it starts.
- Every check runs here, on outputs the workers send back as `torch.save` bytes (read with
  `torch.load(weights_only=True)`: data, never code), against inputs generated here from the
  same seeds. Patching the reference or the harness inside a worker changes nothing here.
- Every timed call is also timed here (`witness.py`), next to a trusted echo: a worker whose
  reported durations leave time unexplained fails the run instead of being ranked, and a ranked
  duration never falls short of this process's clock by more than a calibrated allowance.
- In ranked mode every timed iteration gets fresh inputs, from seeds that cannot be predicted
  from the case's, and its output is checked; the kernel always works on a copy.

Tasks that use it must generate inputs deterministically from their arguments (the seed) and
check outputs without collective communication: both run here as well as in the workers.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import multiprocessing
import os
import secrets
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.models import Case, Verdict
from cluster_manager.harness import timing, worker
from cluster_manager.harness.witness import Calibration, ClockWitness
from cluster_manager.sandbox.lifecycle import make_undumpable

MAX_BENCHMARK_BUDGET_S = 3.0
# Ranked runs take enough calls, budget permitting, that the few whose windows a preempted
# process stretched can be left out of holding them to this process's clock.
RANKED_MIN_RUNS = 100
CALIBRATION_CALLS = 50
# A call that keeps the harness waiting lets its core idle: the reply takes longer to see than
# an empty call's (about 40 µs more on a 2-core VM). Real calls are calibrated on a busy wait.
CALIBRATION_BUSY_NS = 200_000
TRANSFER_SAMPLES = 5
_clock = time.perf_counter_ns


@dataclass(frozen=True)
class Outcome:
    ok: bool
    error: str = ""
    message: str = ""
    verdict: Verdict | None = None  # set when the failure is not a wrong answer
    stats: timing.Stats | None = None
    report: str = ""


class CaseFailed(Exception):
    """Ends the case with `outcome`: a wrong answer, the worker's error, or its death.
    `worker_lost`: the worker died or broke the protocol, so it must be replaced; one that
    reported its submission's exception is still in step and is kept (no new interpreter)."""

    def __init__(self, outcome: Outcome, *, worker_lost: bool = False) -> None:
        super().__init__(outcome.error)
        self.outcome = outcome
        self.worker_lost = worker_lost


def _wrong(message: str) -> CaseFailed:
    return CaseFailed(Outcome(ok=False, error=message))


def _broken(message: str) -> CaseFailed:
    outcome = Outcome(ok=False, error=message, verdict=Verdict.RUNTIME_ERROR)
    return CaseFailed(outcome, worker_lost=True)


# --- what workers send ------------------------------------------------------------------------

_FAILURE_VERDICTS = {Verdict.RUNTIME_ERROR.value, Verdict.MEMORY_LIMIT.value}


def _parse(data: bytes) -> dict[str, Any]:
    import torch

    try:
        message = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as exc:
        raise _broken(
            "the submission's process sent something other than plain tensors, numbers and "
            f"containers of them (outputs must be plain tensors): {_first_line(exc)}"
        ) from None
    if not isinstance(message, dict) or not isinstance(message.get("ok"), bool):
        raise _broken("the submission's process sent a malformed reply")
    return message


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


# --- the reference, run here ------------------------------------------------------------------


class Reference:
    """The task's generator and check, imported before any worker imports the submission."""

    def __init__(self) -> None:
        import reference  # type: ignore[import-not-found]

        self._module = reference

    def generate(self, args: Case, rank: int | None) -> Any:
        generate_input = self._module.generate_input
        return generate_input(**args) if rank is None else generate_input(**args, rank=rank)

    def check(self, args: Case, rank: int | None, output: Any) -> str:
        """Checks `output` against inputs generated here; accepts both check styles (an error
        string, empty when right, or `(ok, message)`). Raises CaseFailed when wrong."""
        problem = worker.not_plain(output)
        if problem:
            raise _wrong(problem)
        data = self.generate(args, rank)
        result = self._module.check_implementation(data, _to_device_of(output, data))
        if isinstance(result, tuple):
            ok, message = bool(result[0]), str(result[1] or "")
        else:
            ok, message = not result, str(result or "")
        if not ok:
            raise _wrong(message or "wrong answer")
        return message


def _to_device_of(output: Any, data: Any) -> Any:
    """Outputs arrive on the CPU; the check compares them where the inputs live."""
    device = _first_device(data)
    if device is None or device.type == "cpu":
        return output
    return _map_tensors(output, lambda t: t.to(device))


def _first_device(data: Any) -> Any:
    import torch

    if isinstance(data, torch.Tensor):
        return data.device
    if isinstance(data, list | tuple):
        return next(filter(None, map(_first_device, data)), None)
    if isinstance(data, dict):
        return next(filter(None, map(_first_device, data.values())), None)
    return None


def _map_tensors(value: Any, function: Callable[[Any], Any]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return function(value)
    if isinstance(value, list | tuple):
        return type(value)(_map_tensors(v, function) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, function) for k, v in value.items()}
    return value


# --- the workers ------------------------------------------------------------------------------


class WorkerProcess:
    """One spawned worker and the connection to it. Each request carries a random token its
    reply must echo: a reply sent ahead of its request, or an extra one, is caught."""

    def __init__(self, context: multiprocessing.context.SpawnContext) -> None:
        self.connection, theirs = context.Pipe()
        self.process: BaseProcess = context.Process(target=worker.serve, args=(theirs,))
        self.process.start()
        theirs.close()
        self._token = 0

    def send(self, step: str, *args: Any) -> None:
        self._token = secrets.randbits(64)
        try:
            self.connection.send((step, self._token, args))
        except OSError:
            raise _died() from None

    def receive(self) -> bytes:
        try:
            return self.connection.recv_bytes()
        except (EOFError, OSError):
            raise _died() from None

    def message(self, data: bytes) -> dict[str, Any]:
        if len(data) == worker.DONE.size:
            raise _out_of_turn()  # a duration where none was asked for
        message = _parse(data)
        if message.get("token") != self._token:
            raise _out_of_turn()
        return _unwrap(message)

    def duration(self, data: bytes) -> float:
        if len(data) != worker.DONE.size:
            self.message(data)  # raises the failure a worker sent in place of a duration
            raise _broken("the submission's process sent no duration")
        value, token = worker.DONE.unpack(data)
        if token != self._token:
            raise _out_of_turn()
        if not value >= 0 or value == float("inf"):
            raise _broken(f"the submission's process reported an impossible duration: {value}")
        return float(value)

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.process.kill()
        self.connection.close()


class Echo:
    """A trusted process that answers at once: the round trip as load makes it right now."""

    def __init__(self, context: multiprocessing.context.SpawnContext) -> None:
        self.connection, theirs = context.Pipe()
        self.process: BaseProcess = context.Process(target=worker.echo, args=(theirs,))
        self.process.start()
        theirs.close()

    def round_trip(self) -> float:
        began = _clock()
        self.connection.send_bytes(b"ping")
        self.connection.recv_bytes()
        return float(_clock() - began)

    def hold(self, data: bytes) -> None:
        """Leaves `data` with the echo, to be sent back by `give`."""
        self.connection.send_bytes(worker.ECHO_HOLD + data)
        self.connection.recv_bytes()

    def give(self) -> bytes:
        self.connection.send_bytes(worker.ECHO_GIVE)
        return self.connection.recv_bytes()

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.process.kill()
        self.connection.close()


def _out_of_turn() -> CaseFailed:
    return _broken("the submission's process replied out of turn")


def _died() -> CaseFailed:
    return _broken("the submission's process exited before returning a result")


class Workers:
    """The submission's processes, one per rank. A worker that fails is replaced."""

    def __init__(self, size: int) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._processes = [WorkerProcess(self._context) for _ in range(size)]
        self.calibrations: dict[int | None, Calibration] = {}  # per world size
        self._echo: Echo | None = None

    @property
    def echo(self) -> Echo:
        if self._echo is None:
            self._echo = Echo(self._context)
        return self._echo

    def ranks(self, world_size: int | None) -> list[WorkerProcess]:
        wanted = world_size or 1
        while len(self._processes) < wanted:
            self._processes.append(WorkerProcess(self._context))
        return self._processes[:wanted]

    def replace(self, ranks: Sequence[WorkerProcess]) -> None:
        for i, process in enumerate(self._processes):
            if process in ranks:
                process.stop()
                self._processes[i] = WorkerProcess(self._context)

    def close(self) -> None:
        """Kills the workers: the submission's threads could keep one alive long after its
        results are in."""
        for process in self._processes:
            process.stop()
        if self._echo is not None:
            self._echo.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _world_size(case: Case) -> int | None:
    value = case.get("world_size")
    return value if isinstance(value, int) else None


# --- one case ---------------------------------------------------------------------------------


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
        self.world_size = _world_size(args)
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


def _test(case: CaseRun) -> Outcome:
    return Outcome(ok=True, message=case.check(case.everywhere("call")))


def _benchmark(case: CaseRun, *, recheck: bool, rule: timing.StopRule) -> Outcome:
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
    fresh = recheck and isinstance(seed, int)

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


def _profile(case: CaseRun) -> Outcome:
    report = case.everywhere("profile")[0].get("report")
    return Outcome(ok=True, report=str(report or ""))


# --- reporting --------------------------------------------------------------------------------


class Reporter:
    def __init__(self, fd: int) -> None:
        os.set_inheritable(fd, False)
        self._file = os.fdopen(fd, "w", encoding="utf-8")

    def log(self, key: str, value: object) -> None:
        self._file.write(f"{key}: {protocol.escape_value(value)}\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _log_failure(out: Reporter, prefix: str, outcome: Outcome) -> None:
    out.log(f"{prefix}.status", "fail")
    out.log(f"{prefix}.error", outcome.error or "failed")
    if outcome.verdict is not None:
        out.log(f"{prefix}.verdict", outcome.verdict.value)


class Harness:
    """Runs a mode's cases through the workers and logs each outcome to the result pipe."""

    def __init__(self, out: Reporter, workers: Workers, reference: Reference) -> None:
        self.out = out
        self.workers = workers
        self.reference = reference

    def case(self, args: Case, body: Callable[[CaseRun], Outcome]) -> Outcome:
        case = CaseRun(self.workers, self.reference, args)
        try:
            case.open()
            try:
                return body(case)
            finally:
                case.close()
        except CaseFailed as failed:
            if failed.worker_lost:
                self.workers.replace(case.ranks)
            return failed.outcome

    def run_tests(self, cases: list[tuple[str, Case]]) -> bool:
        passed = True
        self.out.log("test-count", len(cases))
        for i, (spec, args) in enumerate(cases):
            self.out.log(f"test.{i}.spec", spec)
            outcome = self.case(args, _test)
            if outcome.ok:
                self.out.log(f"test.{i}.status", "pass")
                if outcome.message:
                    self.out.log(f"test.{i}.message", outcome.message)
            else:
                _log_failure(self.out, f"test.{i}", outcome)
                passed = False
        return passed

    def run_benchmarks(
        self, cases: list[tuple[str, Case]], *, recheck: bool, budget_s: float
    ) -> bool:
        per_case = min(MAX_BENCHMARK_BUDGET_S, budget_s / (len(cases) + 1))
        rule = timing.StopRule(wall_budget_ns=per_case * 1e9)
        if recheck:
            rule = replace(rule, min_runs=RANKED_MIN_RUNS)
        passed = True
        self.out.log("benchmark-count", len(cases))
        for i, (spec, args) in enumerate(cases):
            self.out.log(f"benchmark.{i}.spec", spec)
            outcome = self.case(
                args,
                lambda case: _benchmark(case, recheck=recheck, rule=rule),
            )
            if outcome.ok and outcome.stats is not None:
                for name in protocol.BENCHMARK_STATS:
                    self.out.log(f"benchmark.{i}.{name}", getattr(outcome.stats, name))
            else:
                _log_failure(self.out, f"benchmark.{i}", outcome)
                passed = False
                if recheck:
                    break  # a ranked run stops at its first failure
        return passed

    def run_profiles(self, cases: list[tuple[str, Case]]) -> bool:
        passed = True
        self.out.log("benchmark-count", len(cases))
        for i, (spec, args) in enumerate(cases):
            self.out.log(f"benchmark.{i}.spec", spec)
            outcome = self.case(args, _profile)
            if outcome.ok:
                self.out.log(f"benchmark.{i}.report", protocol.encode_report(outcome.report))
            else:
                _log_failure(self.out, f"benchmark.{i}", outcome)
                passed = False
        return passed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fd_raw = os.environ.pop(protocol.ENV_FD, None)
    seed_raw = os.environ.pop(protocol.ENV_SEED, None)
    gpus = int(os.environ.pop(protocol.ENV_GPUS, "1") or 1)
    budget_s = float(os.environ.pop(protocol.ENV_TIME_BUDGET, "60") or 60)
    # Keeps the workers (same user) out of /proc/<pid>/fd, environ and mem, and from ptrace.
    make_undumpable()
    if not fd_raw:
        print(f"{protocol.ENV_FD} is not set", file=sys.stderr)
        return protocol.EXIT_PIPE_FAIL
    if len(argv) != 2:
        print("usage: evaluate MODE TESTS_FILE", file=sys.stderr)
        return 2
    mode, tests_file = argv
    if mode not in ("test", "benchmark", "leaderboard", "profile"):
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    try:
        cases = protocol.parse_tests_file(Path(tests_file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read test cases from {tests_file}: {exc}", file=sys.stderr)
        return protocol.EXIT_TEST_SPEC
    if seed_raw:
        secret = int(seed_raw)
        for _, case in cases:
            if isinstance(case.get("seed"), int):
                case["seed"] = protocol.combine_seed(int(case["seed"]), secret)

    out = Reporter(int(fd_raw))
    # Started first: their interpreters boot while this process imports the reference.
    workers = Workers(gpus if any(_world_size(c) for _, c in cases) else 1)
    try:
        reference = Reference()
        if mode in ("benchmark", "leaderboard"):
            calibrate(workers, reference, {_world_size(c) for _, c in cases})
        harness = Harness(out, workers, reference)
        if mode == "test":
            passed = harness.run_tests(cases)
        elif mode == "profile":
            passed = harness.run_profiles(cases)
        else:
            passed = harness.run_benchmarks(cases, recheck=mode == "leaderboard", budget_s=budget_s)
        out.log("check", "pass" if passed else "fail")
        return 0 if passed else protocol.EXIT_TEST_FAIL
    finally:
        workers.close()
        out.close()


if __name__ == "__main__":
    sys.exit(main())
