"""The peaks of a CPU runner's machine, measured once and cached: what a case run on `CPU`
(a type with no published peaks) is measured against (core/speed_of_light.py).

Two short measurements with numpy, on every core this process may use: a stream copy of two
64 MiB arrays split across threads (numpy copies without the GIL; bytes read plus bytes
written over the best time), and a square matmul in fp32 and fp64 (BLAS's own threads;
2·n³ FLOPs over the best time). Under a second on a laptop; cached in
`$CLUSTER_MANAGER_PEAKS_CACHE`, else `${XDG_CACHE_HOME:-~/.cache}/cluster-manager/peaks/`, one
file per machine (its host name, CPU model, core count and memory). They are what honest code
reaches, not a ceiling (caches beat a stream), so they are `measured`: shown, never a reason
to hold a score.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from cluster_manager.core.models import RunRequest
from cluster_manager.core.run_results import RunResult
from cluster_manager.core.speed_of_light import Peaks

CACHE_ENV = "CLUSTER_MANAGER_PEAKS_CACHE"
COPY_BYTES = 64 << 20
REPEATS = 5
# A matmul this size is timed when a smaller one shows BLAS is fast enough for it.
MATMUL_SIZES = (256, 512, 1024)
_QUICK_S = 0.005


def run_peaks(request: RunRequest, result: RunResult, system: dict[str, Any]) -> Peaks | None:
    """What the run's timed cases are measured against: the GPU type's published peaks, which
    came with the request; on a machine without a GPU, its own (measured once, here, after the
    phases); else none. Never raises: figures are not worth a run."""
    if request.peaks is not None or request.task.speed_of_light is None:
        return request.peaks
    timed = any(b.passed and b.runs > 0 for b in result.benchmarks)
    if not timed or int(system.get("device_count") or 0) > 0:
        return None
    try:
        return cpu_peaks(system)
    except Exception:  # numpy missing or broken: achieved rates only
        return None


def cache_dir() -> Path:
    if explicit := os.environ.get(CACHE_ENV):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cluster-manager" / "peaks"


def machine_key(system: dict[str, Any]) -> str:
    """Which machine this is: the same key for every run on it, another on another."""
    memory = ""
    with contextlib.suppress(OSError):
        memory = Path("/proc/meminfo").read_text().split("\n", 1)[0]
    parts = (platform.node(), str(system.get("cpu", "")), str(os.cpu_count()), memory)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def cpu_peaks(system: dict[str, Any]) -> Peaks:
    """This machine's peaks: from the cache, else measured now and cached (where the cache
    cannot be written, measured again next time)."""
    path = cache_dir() / f"cpu-{machine_key(system)}.json"
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        cached = Peaks.from_json(json.loads(path.read_text("utf-8")))
        if cached is not None and cached.memory_gbs:
            return cached
    peaks = measure()
    with contextlib.suppress(OSError):
        _write(path, json.dumps(peaks.to_json()))
    return peaks


def _write(path: Path, text: str) -> None:
    """Whole or not at all: two runners measuring at once each leave a complete file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".peaks-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        Path(tmp).replace(path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def measure() -> Peaks:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    src = np.ones(COPY_BYTES // 8)
    dst = np.zeros_like(src)
    bounds = [len(src) * i // threads for i in range(threads + 1)]
    slices = [slice(a, b) for a, b in itertools.pairwise(bounds)]
    with ThreadPoolExecutor(threads) as pool:

        def copy_part(part: slice) -> None:
            np.copyto(dst[part], src[part])

        def copy() -> None:
            list(pool.map(copy_part, slices))

        seconds = _best(copy)
    tflops = {"fp32": _matmul_tflops(np, np.float32), "fp64": _matmul_tflops(np, np.float64)}
    return Peaks(memory_gbs=2 * COPY_BYTES / seconds / 1e9, tflops=tflops, measured=True)


def _matmul_tflops(np: Any, dtype: Any) -> float:
    for n in MATMUL_SIZES:
        a = np.ones((n, n), dtype=dtype)
        b = np.ones((n, n), dtype=dtype)
        seconds = _best(partial(np.matmul, a, b))
        if seconds > _QUICK_S:
            break
    return 2 * n**3 / seconds / 1e12


def _best(call: Callable[[], object]) -> float:
    call()  # warm: pages faulted in, threads started
    times = []
    for _ in range(REPEATS):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return max(min(times), 1e-9)
