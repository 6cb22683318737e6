"""Choosing and opening probes on this machine (no GPU driver), and sampling in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from cluster_manager.telemetry import amd, nvml
from cluster_manager.telemetry.choice import PROBE_ENV, chosen_factory, open_any
from cluster_manager.telemetry.probes import visible_device
from cluster_manager.telemetry.recorder import RunTelemetry
from cluster_manager.telemetry.sampler import Sampler
from tests.telemetry.fakes import CLEAN, FakeProbe, clean_probe, throttled_probe


def test_nvml_says_why_it_cannot_open_without_a_driver():
    pytest.importorskip("pynvml")  # nvidia-ml-py is a runner requirement
    probe = nvml.open_nvml(None)
    assert probe.name == "none"
    assert probe.unavailable_reason.startswith("NVML unavailable: ")
    assert "NVML Shared Library Not Found" in probe.unavailable_reason
    probe.close()


def test_amd_smi_says_why_it_cannot_open_where_rocm_is_absent():
    probe = amd.open_amdsmi("0")
    assert probe.name == "none"
    assert probe.unavailable_reason.startswith("AMD SMI unavailable: ")


def test_auto_gives_every_vendors_reason():
    probe = open_any(None)
    assert "NVML unavailable" in probe.unavailable_reason
    assert "AMD SMI unavailable" in probe.unavailable_reason


def test_the_environment_chooses_the_probe():
    assert chosen_factory({}) is open_any
    assert chosen_factory({PROBE_ENV: "nvml"}) is nvml.open_nvml
    assert chosen_factory({PROBE_ENV: "tests.telemetry.fakes:clean_probe"}) is clean_probe
    off = chosen_factory({PROBE_ENV: "none"})(None)
    assert "turned off" in off.unavailable_reason
    typo = chosen_factory({PROBE_ENV: "nvlm"})(None)
    assert "names no probe" in typo.unavailable_reason


def test_throttle_reason_bits_have_common_names():
    assert nvml.reasons_of(0x1 | 0x20) == {"gpu_idle", "sw_thermal_slowdown"}
    assert amd.reasons_of(1 << 33) == {"thermal_limit"}
    assert amd.reasons_of(1 | 1 << 17) == {"power_limit", "current_limit"}


def test_the_device_is_the_first_the_task_sees():
    assert visible_device({}) is None
    assert visible_device({"CUDA_VISIBLE_DEVICES": "3,5"}) == "3"
    assert visible_device({"HIP_VISIBLE_DEVICES": "GPU-ab12, 1"}) == "GPU-ab12"


def _until(condition: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_the_sampler_samples_at_10_hz_or_more_in_a_thread_and_stops_at_once():
    probe = FakeProbe([CLEAN])
    with Sampler(probe) as sampler:
        assert any(t.name == "gpu-telemetry" and t.daemon for t in threading.enumerate())
        started = time.monotonic()
        _until(lambda: len(sampler.samples) >= 5)
        elapsed = time.monotonic() - started
        stopping = time.monotonic()
    # Woken, not left to finish its sleep (the join itself gives up after 2 s).
    assert time.monotonic() - stopping < 1.0
    assert not any(t.name == "gpu-telemetry" for t in threading.enumerate())
    assert elapsed < 2.0  # 10 Hz or more would take 0.5 s; the rest is room for a busy machine
    assert sampler.samples[0] == CLEAN and sampler.error == ""


def test_a_probe_that_fails_midway_keeps_what_it_sampled():
    class Failing(FakeProbe):
        def sample(self):
            if self.taken >= 2:
                raise RuntimeError("GPU is lost")
            return super().sample()

    with Sampler(Failing([CLEAN])) as sampler:
        _until(lambda: sampler.error != "")
    assert len(sampler.samples) == 2
    assert sampler.error == "sampling stopped: GPU is lost"


def test_only_timed_phases_are_sampled_and_the_probe_is_closed():
    opened: list[FakeProbe] = []

    def factory(device):
        opened.append(throttled_probe(device))
        return opened[-1]

    telemetry = RunTelemetry(factory, device="2", interval_s=0.01)
    with telemetry.phase("test"):
        time.sleep(0.05)
    assert opened == []  # a test phase times nothing: no probe is even opened
    with telemetry.phase("leaderboard"):
        _until(lambda: opened and opened[0].taken >= 3)
    telemetry.close()
    assert list(telemetry.phases) == ["leaderboard"]
    ranked = telemetry.phases["leaderboard"]
    assert ranked.samples >= 3 and ranked.throttled_share == 1.0
    assert ranked.device == "Fake GPU"
    assert opened[0].device == "2" and opened[0].closed


def test_a_probe_that_cannot_open_gives_a_none_entry_with_its_reason():
    def broken(device):
        raise OSError("driver mismatch")

    telemetry = RunTelemetry(broken)
    with telemetry.phase("benchmark"):
        pass
    phase = telemetry.phases["benchmark"]
    assert phase.probe == "none" and phase.samples == 0
    assert "driver mismatch" in phase.unavailable
