"""Profile mode's contracts: the request's Nsight Compute filter and the profiler's outcome,
through JSON and the payload encoding, old payloads included."""

from __future__ import annotations

import base64
import json
import secrets
import zlib
from typing import Any

import pytest

from cluster_manager.core.models import Mode, RunRequest, Verdict
from cluster_manager.core.payload import PayloadError, decode_payload, encode_payload
from cluster_manager.core.profiling import (
    DEFAULT_LAUNCH_COUNT,
    InvalidProfileOptions,
    ProfileOptions,
    ProfilerOutcome,
)
from cluster_manager.core.run_results import PhaseOutcome, RunResult
from tests.core.test_models import py_task, request


def _profile_request(**changes: Any) -> RunRequest:
    return request(py_task(), Mode.PROFILE, **changes)


def test_defaults_capture_the_first_kernels_of_the_submission() -> None:
    options = ProfileOptions()
    assert options.kernel_name is None
    assert (options.launch_skip, options.launch_count) == (0, DEFAULT_LAUNCH_COUNT)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kernel_name": ""}, "kernel name filter"),
        ({"kernel_name": "x" * 201}, "kernel name filter"),
        ({"kernel_name": "gemm("}, "not a regex"),
        ({"kernel_name_base": "short"}, "kernel name base"),
        ({"launch_skip": -1}, "launch skip"),
        ({"launch_count": 0}, "launch count"),
        ({"launch_count": 51}, "launch count"),
        ({"launch_count": True}, "launch count"),
    ],
)
def test_bad_options_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidProfileOptions, match=message):
        ProfileOptions(**changes)


def test_arch_and_profile_options_travel_in_the_payload() -> None:
    options = ProfileOptions(kernel_name="gemm|mma", kernel_name_base="demangled", launch_skip=2)
    request = _profile_request(arch="sm_90a", profile=options)
    for key in (None, secrets.token_bytes(32)):
        again = decode_payload(encode_payload(request, key), key)
        assert again == request
        assert again.arch == "sm_90a" and again.profile == options


def test_a_payload_from_before_arch_and_profile_still_reads() -> None:
    data = _profile_request().to_json()
    del data["arch"], data["profile"]
    text = base64.b64encode(zlib.compress(json.dumps(data).encode())).decode()
    again = decode_payload(text)
    assert again.arch is None and again.profile == ProfileOptions()


def test_a_payload_with_a_bad_filter_is_refused() -> None:
    data = _profile_request().to_json()
    data["profile"] = {"launch_count": 10_000}
    text = base64.b64encode(zlib.compress(json.dumps(data).encode())).decode()
    with pytest.raises(PayloadError, match="launch count"):
        decode_payload(text)


def test_the_profiler_outcome_round_trips_in_the_result() -> None:
    profiler = ProfilerOutcome(
        tool="ncu", report="AAAA", report_bytes=3, details='"ID","Kernel Name"', command=("ncu",)
    )
    phase = PhaseOutcome(
        name="profile",
        exit_code=0,
        timed_out=False,
        duration_s=1.0,
        stdout="",
        stderr="",
        verdict=Verdict.PASSED,
        message="",
        profiler=profiler,
    )
    result = RunResult(True, Verdict.PASSED, Mode.PROFILE, "", phases=(phase,))
    again = RunResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result
    assert again.phases[0].profiler == profiler


@pytest.mark.parametrize(
    ("outcome", "says"),
    [
        (ProfilerOutcome("ncu", report="AAAA", report_bytes=3), "Nsight Compute report attached"),
        (ProfilerOutcome("ncu", report_bytes=9 << 20), "too big to attach"),
        (ProfilerOutcome("ncu", note="==ERROR== ERR_NVGPUCTRPERM"), "ERR_NVGPUCTRPERM"),
        (ProfilerOutcome("torch", note="ncu not found on PATH"), "torch profiler used (ncu not"),
        (ProfilerOutcome("task", note="ncu not found on PATH"), "the task's main profiled"),
    ],
)
def test_the_summary_says_what_is_attached_or_why_not(outcome: ProfilerOutcome, says: str) -> None:
    assert says in outcome.summary()
