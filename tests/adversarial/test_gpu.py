"""Timing attacks only a GPU allows: patched CUDA events, work left on a side stream or queued
to run under the flush or the stand-in's replay, a cached result replayed through a CUDA
graph, an output written asynchronously. They run where torch sees a CUDA device (the GPU
check runs them on an H100); elsewhere they are skipped. Each gains at most a tenth over the
honest score of the same kernel, or fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_manager.core.models import Task
from tests.adversarial.helpers import attack, failed_in, not_ranked, ranked_at_least, small_task

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.adversarial,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

CUDA_REFERENCE = """
import torch

def generate_input(size, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed % 2**63)
    return torch.randn(size, device="cuda", generator=gen)

def ref_kernel(data):
    return data.clone()

def check_implementation(data, output):
    if not isinstance(output, torch.Tensor) or output.shape != data.shape:
        return "output has the wrong shape"
    if not torch.equal(output.to(data.device), data):
        return "mismatch"
    return ""
"""

# A kernel that takes milliseconds on any GPU: 200 dependent matrix products.
SLOW = """
import torch

def work(data):
    m = torch.ones(1024, 1024, device=data.device)
    for _ in range(200):
        m = m @ m / 1024
    return data.clone() + 0 * m[0, 0]
"""


@pytest.fixture
def cuda_identity(tmp_path: Path) -> Task:
    return small_task(tmp_path / "cuda", reference=CUDA_REFERENCE)


@pytest.mark.reliability(
    "Anti-cheat",
    "GPU: patching torch.cuda.Event.elapsed_time to report 1 µs for a slow kernel",
    "ranked at the real time by the harness's clock (at least nine tenths of the honest score)",
)
def test_patched_cuda_events(cuda_identity, record_property):
    code = (
        SLOW
        + """
torch.cuda.Event.elapsed_time = lambda self, end: 0.001

def custom_kernel(data):
    return work(data)
"""
    )
    result = attack(cuda_identity, code)
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    honest = attack(cuda_identity, SLOW + "\ndef custom_kernel(data):\n    return work(data)\n")
    assert honest.passed, honest.message
    assert ranked_at_least(result, 0.9 * honest.score), (result.message, result.score)


@pytest.mark.reliability(
    "Anti-cheat",
    "GPU: returning at once and finishing the work on a side stream after the timer stopped",
    "wrong_answer, or ranked at the real time (the output arrives late, inside the window)",
)
def test_work_left_on_a_side_stream(cuda_identity, record_property):
    code = (
        SLOW
        + """
side = torch.cuda.Stream()

def custom_kernel(data):
    out = torch.empty_like(data)
    with torch.cuda.stream(side):
        out.copy_(work(data))
    return out
"""
    )
    result = attack(cuda_identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    honest = attack(cuda_identity, SLOW + "\ndef custom_kernel(data):\n    return work(data)\n")
    assert honest.passed, honest.message
    assert ranked_at_least(result, 0.9 * honest.score), (result.message, result.score)


@pytest.mark.reliability(
    "Anti-cheat",
    "GPU: capturing the kernel in a CUDA graph once and replaying the cached result",
    "wrong_answer in the ranked phase (fresh inputs every timed call), never ranked",
)
def test_a_cached_result_replayed_through_a_cuda_graph(cuda_identity, record_property):
    code = """
import torch

graphs = {}

def custom_kernel(data):
    key = tuple(data.shape)
    if key not in graphs:
        static_in = data.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = static_in * 1
        graphs[key] = (graph, static_out)
    graph, static_out = graphs[key]
    graph.replay()  # the inputs captured first, never these
    return static_out
"""
    result = attack(cuda_identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert failed_in(result, "leaderboard") or failed_in(result, "test"), result.message
    assert not_ranked(result)


@pytest.mark.reliability(
    "Anti-cheat",
    "GPU: writing the output with a non-blocking copy that lands after the timer stopped",
    "the output is complete when it is read (or the run fails), never ranked at the fast time",
)
def test_an_output_written_asynchronously(cuda_identity, record_property):
    code = (
        SLOW
        + """
def custom_kernel(data):
    done = work(data).cpu().pin_memory()
    out = torch.empty_like(data)
    out.copy_(done, non_blocking=True)
    return out
"""
    )
    result = attack(cuda_identity, code)
    record_property("observed", f"{result.verdict.value}: {result.message}")
    assert result.passed or not_ranked(result), result.message


@pytest.mark.reliability(
    "Anti-cheat",
    "GPU: work queued on a side stream before the call returns, to run under the next call's "
    "L2 flush",
    "the flush is waited for before the call's begin event: ranked at the real time",
)
def test_work_queued_to_run_under_the_flush(cuda_identity, record_property):
    """Attack: each call queues heavy work on a side stream and returns at once; that work
    would overlap the next call's flush if the flush were not waited for, and the next call
    would seem as quick. Expected: the timer's synchronize joins it inside this call."""
    code = (
        SLOW
        + """
side = torch.cuda.Stream()

def custom_kernel(data):
    with torch.cuda.stream(side):
        work(data)  # left running: it would hide under the next flush
    return data.clone()
"""
    )
    result = attack(cuda_identity, code)
    honest = attack(cuda_identity, SLOW + "\ndef custom_kernel(data):\n    return work(data)\n")
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert honest.passed, honest.message
    assert ranked_at_least(result, 0.9 * honest.score), (result.message, result.score)


@pytest.mark.reliability(
    "Anti-cheat",
    "GPU: events patched to 1 µs, and a thread that queues heavy work right after each call's "
    "output leaves, to slow the stand-in's replay while the worker is stopped",
    "at least nine tenths of the honest score; not yet run on a GPU: stopping the processes "
    "does not stop work queued on the device (docs/MEASUREMENT.md)",
)
def test_work_queued_to_slow_the_stand_in(cuda_identity, record_property):
    """Attack: a thread queues 50 large matrix products on its own stream half a millisecond
    after each call returns, when the output has left and the worker is about to be stopped:
    they run on the GPU while the stand-in replays, slowing its flush and copies, and the
    events report 1 µs, so the score is the clock's. Expected: within a tenth of the honest
    score; if the slowed replays take more than that off, the GPU check's `hostile` row fails
    and says by how much."""
    code = (
        SLOW
        + """
import threading, time

torch.cuda.Event.elapsed_time = lambda self, end: 0.001
returned = threading.Event()

def junk():
    side = torch.cuda.Stream()
    m = torch.ones(2048, 2048, device="cuda")
    while True:
        returned.wait()
        returned.clear()
        time.sleep(0.0005)  # after the output has left
        with torch.cuda.stream(side):
            for _ in range(50):
                m = m @ m / 2048

threading.Thread(target=junk, daemon=True).start()

def custom_kernel(data):
    out = work(data)
    returned.set()
    return out
"""
    )
    result = attack(cuda_identity, code)
    honest = attack(cuda_identity, SLOW + "\ndef custom_kernel(data):\n    return work(data)\n")
    record_property("observed", f"{result.verdict.value}: score {result.score}")
    assert honest.passed, honest.message
    assert ranked_at_least(result, 0.9 * honest.score), (result.message, result.score)
