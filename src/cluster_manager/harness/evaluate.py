"""The built-in eval harness: `python -m cluster_manager.harness.evaluate MODE TESTS_FILE`.

It speaks the popcorn protocol like the public problem sets' `eval.py`, with these guarantees:
- This process holds the result pipe and the secret seed; it never imports the submission, and
  what workers send back is unpickled with an allowlist, so it cannot run code here either.
- The submission is imported only in spawned worker processes, which get neither the pipe (it
  is not inherited) nor the seed (removed from the environment before they start); they see
  only the per-case seeds already mixed with it.
- Every timed iteration in ranked mode gets fresh inputs, from seeds that cannot be predicted
  from the case's, and a correctness re-check; the kernel always works on a clone: the check
  compares against inputs it never saw. Outputs must be plain tensors (or containers and
  numbers), not objects that could compute their values when the check reads them.

Limits of the design: the worker runs the submission and the check, and measures the time, in
one process. A submission that deliberately patches the harness or the reference inside that
process (their functions, `gc`, frames) can forge what the worker reports; only moving the
check and the clock out of the submission's process would stop that.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import io
import multiprocessing
import multiprocessing.reduction
import os
import pickle
import secrets
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import process as futures_process
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_manager.core import protocol
from cluster_manager.core.models import Case, Verdict
from cluster_manager.harness import timing
from cluster_manager.harness.process import die_with_parent, make_undumpable

ENV_TIME_BUDGET = "CLUSTER_MANAGER_TIME_BUDGET"
MAX_BENCHMARK_BUDGET_S = 3.0
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Job:
    """One unit of work for a worker: a test, a benchmark or a profile of one case (one rank)."""

    kind: str  # "test" | "benchmark" | "profile"
    args: Case
    recheck: bool = False
    rule: timing.StopRule = field(default_factory=timing.StopRule)
    rank: int = 0
    world_size: int | None = None
    port: int = 0
    nonce: int = 0  # the same on every rank; the iterations' seeds derive from it


@dataclass(frozen=True)
class Outcome:
    ok: bool
    error: str = ""
    message: str = ""
    verdict: Verdict | None = None  # set when the failure is not a wrong answer
    stats: timing.Stats | None = None
    report: str = ""


# --- worker side: runs in the spawned process that imports the submission --------------------


_cuda_synchronize: Callable[[], None] | None = None  # torch's own, taken before any submission


def _torch() -> Any:
    import torch

    return torch


def _worker_init() -> None:
    """Runs in each worker before it imports the submission."""
    global _cuda_synchronize
    die_with_parent()
    torch = _torch()
    # A submission that replaces torch.cuda.synchronize must not stop us waiting for the GPU.
    _cuda_synchronize = torch.cuda.synchronize if torch.cuda.is_available() else None


def _device(rank: int) -> Any:
    torch = _torch()
    return torch.device(f"cuda:{rank}") if torch.cuda.is_available() else torch.device("cpu")


def _synchronize() -> None:
    if _cuda_synchronize is not None:
        _cuda_synchronize()


def _clone(data: Any) -> Any:
    """Deep copy of every tensor in `data`, so the kernel can never touch the check's inputs."""
    torch = _torch()
    if isinstance(data, tuple):
        return tuple(_clone(x) for x in data)
    if isinstance(data, list):
        return [_clone(x) for x in data]
    if isinstance(data, dict):
        return {k: _clone(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def _generate(job: Job, args: Case) -> Any:
    from reference import generate_input  # type: ignore[import-not-found]

    if job.world_size is None:
        return generate_input(**args)
    return generate_input(**args, rank=job.rank)


_PLAIN = (int, float, complex, bool, str, bytes, type(None))


def _not_plain(output: Any) -> str | None:
    """Why `output` is not plain data, if it is not: a tensor subclass (or any object) could
    compute its values when the check reads them, after the timer stopped."""
    kind = type(output)
    if kind is _torch().Tensor or kind in _PLAIN:
        return None
    if kind in (tuple, list):
        return next(filter(None, map(_not_plain, output)), None)
    if kind is dict:
        return next(filter(None, map(_not_plain, output.values())), None)
    return f"the output must be plain tensors, not {kind.__module__}.{kind.__qualname__}"


def _check(data: Any, output: Any) -> tuple[bool, str]:
    """Accepts both check styles: an error string (empty when right) or `(ok, message)`."""
    from reference import check_implementation  # type: ignore[import-not-found]

    problem = _not_plain(output)
    if problem:
        return False, problem
    result = check_implementation(data, output)
    if isinstance(result, tuple):
        ok, message = result
        return bool(ok), str(message or "")
    return not result, str(result or "")


def _kernel() -> Callable[[Any], Any]:
    from submission import custom_kernel  # type: ignore[import-not-found]

    return custom_kernel


def _test(job: Job) -> Outcome:
    kernel = _kernel()
    data = _generate(job, job.args)
    output = kernel(_clone(data))
    _synchronize()
    ok, message = _check(data, output)
    return Outcome(ok=ok, error="" if ok else message, message=message if ok else "")


def _distributed_check(check: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    """Every rank checks every iteration; if any rank fails, all stop together."""
    torch = _torch()
    import torch.distributed as dist

    def checked(output: Any) -> str | None:
        error = check(output)
        flag = torch.tensor([1 if error else 0], device=_device(dist.get_rank()))
        dist.all_reduce(flag)
        if flag.item():
            return error or "another rank failed the correctness check"
        return None

    return checked


def _benchmark(job: Job) -> Outcome:
    torch = _torch()
    kernel = _kernel()
    data = _generate(job, job.args)
    # One checked call first: it also triggers any JIT compilation for this shape.
    ok, message = _check(data, kernel(_clone(data)))
    if not ok:
        return Outcome(ok=False, error=message)

    distributed = job.world_size is not None
    if distributed:
        import torch.distributed as dist

        def sync() -> None:
            _synchronize()
            dist.barrier()

        timer: timing.Timer = timing.CpuTimer(sync)

        def agree(stop: bool) -> bool:
            flag = torch.tensor([1 if stop else 0], device=_device(job.rank))
            dist.broadcast(flag, 0)
            return bool(flag.item())
    else:
        sync = _synchronize
        timer = (
            timing.CudaEventTimer(torch, _synchronize)
            if torch.cuda.is_available()
            else timing.CpuTimer()
        )

        def agree(stop: bool) -> bool:
            return stop

    warm_data = _clone(data)
    if distributed:
        # Ranks must make the same number of collective calls: a fixed count, not a budget.
        timing.warm_up(lambda: kernel(_clone(warm_data)), sync, min_calls=3, budget_ns=0)
    else:
        timing.warm_up(lambda: kernel(warm_data), sync)

    if job.recheck:

        def prepare(i: int) -> timing.Iteration:
            args = dict(job.args)
            if isinstance(args.get("seed"), int):
                args["seed"] = _iteration_seed(args["seed"], job.nonce, i)
            fresh = _generate(job, args)

            def check(output: Any) -> str | None:
                good, why = _check(fresh, output)
                return None if good else why

            return timing.Iteration(
                _clone(fresh), _distributed_check(check) if distributed else check
            )
    else:
        fixed = _clone(data)

        def prepare(i: int) -> timing.Iteration:
            return timing.Iteration(fixed)

    result = timing.measure(prepare, kernel, timer, job.rule, agree=agree)
    if isinstance(result, str):
        return Outcome(ok=False, error=result)
    return Outcome(ok=True, stats=result)


def _iteration_seed(seed: int, nonce: int, i: int) -> int:
    """Above the case's seed but unpredictable from it (or from the inputs, which may carry
    it): nothing can compute the next iteration's answer ahead, off the clock."""
    digest = hashlib.blake2b(f"{nonce}:{i}".encode(), digest_size=7).digest()
    return seed + 1 + int.from_bytes(digest, "big")


def _profile(job: Job) -> Outcome:
    torch = _torch()
    from torch.profiler import ProfilerActivity, profile

    kernel = _kernel()
    data = _generate(job, job.args)
    kernel(_clone(data))  # warm-up outside the trace
    _synchronize()
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    argument = _clone(data)
    with profile(activities=activities) as prof:
        kernel(argument)
        _synchronize()
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    return Outcome(ok=True, report=prof.key_averages().table(sort_by=sort_by, row_limit=20))


_JOBS: dict[str, Callable[[Job], Outcome]] = {
    "test": _test,
    "benchmark": _benchmark,
    "profile": _profile,
}


@contextlib.contextmanager
def _process_group(job: Job) -> Iterator[None]:
    if job.world_size is None:
        yield
        return
    torch = _torch()
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(job.rank)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"tcp://127.0.0.1:{job.port}",
        rank=job.rank,
        world_size=job.world_size,
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


# How allocators word running out of memory (torch CPU, CUDA, HIP).
_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def _failure(exc: BaseException) -> Outcome:
    """The submission is untrusted: report its exception as text, never re-raise it."""
    text = "".join(traceback.format_exception(exc))[-MAX_ERROR_CHARS:]
    name = type(exc).__name__
    text_lower = str(exc).lower()
    oom = (
        isinstance(exc, MemoryError)
        or name == "OutOfMemoryError"
        or any(marker in text_lower for marker in _OOM_MARKERS)
    )
    return Outcome(
        ok=False,
        error=text,
        verdict=Verdict.MEMORY_LIMIT if oom else Verdict.RUNTIME_ERROR,
    )


def run_job(job: Job) -> Outcome:
    try:
        with _process_group(job):
            return _JOBS[job.kind](job)
    except BaseException as exc:
        return _failure(exc)


# --- parent side: holds the pipe, never imports the submission --------------------------------


def _allowed_results() -> set[int]:
    """What a worker may send: our result types, the executor's envelope, builtin errors."""
    allowed: list[object] = [
        Outcome,
        timing.Stats,
        Verdict,
        futures_process._ResultItem,
        futures_process._RemoteTraceback,
        futures_process._rebuild_exc,
    ]
    allowed += [
        v for v in vars(builtins).values() if isinstance(v, type) and issubclass(v, BaseException)
    ]
    return {id(x) for x in allowed}


class _ResultUnpickler(pickle.Unpickler):
    allowed = _allowed_results()

    def find_class(self, module: str, name: str) -> Any:
        # Only modules already loaded: looking a name up must never import anything.
        found = getattr(sys.modules.get(module), name, None)
        if found is None or id(found) not in self.allowed:
            raise pickle.UnpicklingError(f"a worker sent a forbidden object: {module}.{name}")
        return found


def _load_result(data: bytes | bytearray | memoryview) -> Any:
    return _ResultUnpickler(io.BytesIO(data)).load()


def _accept_only_results() -> None:
    """Workers run the submission: unpickling what they send must not run code in the process
    holding the pipe. An object outside the allowlist breaks the pool: a runtime error."""
    multiprocessing.reduction.ForkingPickler.loads = staticmethod(_load_result)


class Reporter:
    def __init__(self, fd: int) -> None:
        os.set_inheritable(fd, False)
        self._file = os.fdopen(fd, "w", encoding="utf-8")

    def log(self, key: str, value: object) -> None:
        self._file.write(f"{key}: {protocol.escape_value(value)}\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Workers:
    """The submission's processes. A worker that dies is reported and replaced."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._context = multiprocessing.get_context("spawn")
        self._executor = self._new_executor()

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self._size, mp_context=self._context, initializer=_worker_init
        )

    def run(self, job: Job) -> Outcome:
        world_size = job.world_size
        if world_size is not None and world_size > self._size:
            _stop(self._executor)
            self._size = world_size
            self._executor = self._new_executor()
        try:
            if world_size is None:
                return self._executor.submit(run_job, job).result()
            port = _free_port()
            futures = [
                self._executor.submit(run_job, _replace(job, rank=r, port=port))
                for r in range(world_size)
            ]
            return _merge_ranks([f.result() for f in futures])
        except BrokenProcessPool:
            _stop(self._executor)
            self._executor = self._new_executor()
            return Outcome(
                ok=False,
                error="the submission's process exited before returning a result",
                verdict=Verdict.RUNTIME_ERROR,
            )

    def close(self) -> None:
        _stop(self._executor)


def _stop(executor: ProcessPoolExecutor) -> None:
    """Kills the workers: they run the submission, whose threads could keep one alive (and
    this process waiting for it) long after its result is in."""
    workers = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            worker.kill()


def _replace(job: Job, **changes: Any) -> Job:
    import dataclasses

    return dataclasses.replace(job, **changes)


def _merge_ranks(outcomes: list[Outcome]) -> Outcome:
    """Rank 0 carries the timings; any failing rank fails the case."""
    failures = [(r, o) for r, o in enumerate(outcomes) if not o.ok]
    if not failures:
        return outcomes[0]
    return Outcome(
        ok=False,
        error="\n".join(f"rank {r}: {o.error}" for r, o in failures),
        verdict=next((o.verdict for _, o in failures if o.verdict), None),
    )


def _log_failure(out: Reporter, prefix: str, outcome: Outcome) -> None:
    out.log(f"{prefix}.status", "fail")
    out.log(f"{prefix}.error", outcome.error or "failed")
    if outcome.verdict is not None:
        out.log(f"{prefix}.verdict", outcome.verdict.value)


def run_tests(out: Reporter, workers: Workers, cases: list[tuple[str, Case]]) -> bool:
    passed = True
    out.log("test-count", len(cases))
    for i, (spec, case) in enumerate(cases):
        out.log(f"test.{i}.spec", spec)
        outcome = workers.run(Job("test", case, world_size=_world_size(case)))
        if outcome.ok:
            out.log(f"test.{i}.status", "pass")
            if outcome.message:
                out.log(f"test.{i}.message", outcome.message)
        else:
            _log_failure(out, f"test.{i}", outcome)
            passed = False
    return passed


def run_benchmarks(
    out: Reporter,
    workers: Workers,
    cases: list[tuple[str, Case]],
    *,
    recheck: bool,
    budget_s: float,
) -> bool:
    per_case = min(MAX_BENCHMARK_BUDGET_S, budget_s / (len(cases) + 1))
    rule = timing.StopRule(wall_budget_ns=per_case * 1e9)
    passed = True
    out.log("benchmark-count", len(cases))
    for i, (spec, case) in enumerate(cases):
        out.log(f"benchmark.{i}.spec", spec)
        job = Job(
            "benchmark",
            case,
            recheck=recheck,
            rule=rule,
            world_size=_world_size(case),
            nonce=secrets.randbits(64),
        )
        outcome = workers.run(job)
        if outcome.ok and outcome.stats is not None:
            for name in protocol.BENCHMARK_STATS:
                out.log(f"benchmark.{i}.{name}", getattr(outcome.stats, name))
        else:
            _log_failure(out, f"benchmark.{i}", outcome)
            passed = False
            if recheck:
                break  # a ranked run stops at its first failure
    return passed


def run_profiles(out: Reporter, workers: Workers, cases: list[tuple[str, Case]]) -> bool:
    passed = True
    out.log("benchmark-count", len(cases))
    for i, (spec, case) in enumerate(cases):
        out.log(f"benchmark.{i}.spec", spec)
        outcome = workers.run(Job("profile", case, world_size=_world_size(case)))
        if outcome.ok:
            out.log(f"benchmark.{i}.report", protocol.encode_report(outcome.report))
        else:
            _log_failure(out, f"benchmark.{i}", outcome)
            passed = False
    return passed


def _world_size(case: Case) -> int | None:
    value = case.get("world_size")
    return value if isinstance(value, int) else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fd_raw = os.environ.pop(protocol.ENV_FD, None)
    seed_raw = os.environ.pop(protocol.ENV_SEED, None)
    gpus = int(os.environ.pop(protocol.ENV_GPUS, "1") or 1)
    budget_s = float(os.environ.pop(ENV_TIME_BUDGET, "60") or 60)
    # Keeps the workers (same user) out of /proc/<pid>/fd, environ and mem, and from ptrace.
    make_undumpable()
    _accept_only_results()
    if not fd_raw:
        print(f"{protocol.ENV_FD} is not set", file=sys.stderr)
        return protocol.EXIT_PIPE_FAIL
    if len(argv) != 2:
        print("usage: evaluate MODE TESTS_FILE", file=sys.stderr)
        return 2
    mode, tests_file = argv
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
    workers = Workers(gpus if any(_world_size(c) for _, c in cases) else 1)
    try:
        if mode == "test":
            passed = run_tests(out, workers, cases)
        elif mode in ("benchmark", "leaderboard"):
            passed = run_benchmarks(
                out, workers, cases, recheck=mode == "leaderboard", budget_s=budget_s
            )
        elif mode == "profile":
            passed = run_profiles(out, workers, cases)
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
        out.log("check", "pass" if passed else "fail")
        return 0 if passed else protocol.EXIT_TEST_FAIL
    finally:
        workers.close()
        out.close()


if __name__ == "__main__":
    sys.exit(main())
