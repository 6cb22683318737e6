"""Profile mode with Nsight Compute: the command that wraps the harness, the report it leaves,
and the torch profiler where the machine has no ncu. The real capture needs an NVIDIA GPU; a
fake `ncu` (tests/support/fake_ncu.py) stands in for it so the plumbing runs end to end, in the
sandbox too."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster_manager.core.models import Mode
from cluster_manager.core.profiling import ProfileOptions
from cluster_manager.core.run_results import RunResult
from cluster_manager.harness import ncu, runner
from cluster_manager.rendering.reports import format_report
from tests.conftest import CORRECT, make_request
from tests.support.fake_ncu import first_line, recorded_argv

HARNESS = [sys.executable, "-m", "cluster_manager.harness.evaluate", "profile", ".cases.txt"]


def test_ncu_wraps_the_harness_and_captures_only_the_submissions_range() -> None:
    argv = ncu.ncu_command("/opt/ncu", ProfileOptions(), "/run/.tmp/p.ncu-rep", HARNESS, nvtx=True)
    assert argv == [
        "/opt/ncu",
        "--target-processes",
        "all",
        "--set",
        "full",
        "--nvtx",
        "--nvtx-include",
        "submission/",
        "--launch-skip",
        "0",
        "--launch-count",
        "10",
        "--export",
        "/run/.tmp/p.ncu-rep",
        "--force-overwrite",
        "--",
        *HARNESS,
    ]


def test_the_requests_filter_narrows_the_capture() -> None:
    options = ProfileOptions(
        kernel_name="gemm_.*", kernel_name_base="demangled", launch_skip=3, launch_count=2
    )
    argv = ncu.ncu_command("ncu", options, "r.ncu-rep", ["./eval.out", "profile"], nvtx=False)
    assert "--nvtx" not in argv  # a task's own main has no range of ours
    pairs = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert pairs["--kernel-name"] == "regex:gemm_.*"
    assert pairs["--kernel-name-base"] == "demangled"
    assert (pairs["--launch-skip"], pairs["--launch-count"]) == ("3", "2")
    assert argv[argv.index("--") + 1 :] == ["./eval.out", "profile"]


def test_the_details_page_is_read_as_csv() -> None:
    assert ncu.details_command("ncu", "r.ncu-rep") == [
        "ncu",
        "--import",
        "r.ncu-rep",
        "--csv",
        "--page",
        "details",
    ]


def test_a_report_is_read_only_when_it_is_a_plain_file_of_its_own(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"host secret")
    link = tmp_path / "link.ncu-rep"
    link.symlink_to(secret)
    assert ncu.read_report(link) is None
    second_name = tmp_path / "hard.ncu-rep"
    os.link(secret, second_name)
    assert ncu.read_report(second_name) is None
    plain = tmp_path / "plain.ncu-rep"
    plain.write_bytes(b"rep")
    assert ncu.read_report(plain) == (3, b"rep")
    assert ncu.read_report(tmp_path / "missing") is None


def test_a_report_past_the_cap_is_left_out_and_its_size_said() -> None:
    size = ncu.MAX_REPORT_BYTES + 1
    outcome = ncu.outcome(["ncu"], (size, b"x" * size), "csv", "")
    assert outcome.report == "" and outcome.report_bytes == size
    assert "not attached" in outcome.note and outcome.details == "csv"


def test_ncus_errors_say_why_nothing_was_captured() -> None:
    output = "==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n"
    outcome = ncu.outcome(["ncu"], None, "", output)
    assert outcome.tool == "ncu" and "ERR_NVGPUCTRPERM" in outcome.note


def test_without_ncu_the_torch_profiler_is_used_and_the_result_says_so(
    identity_task: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ncu.NCU_ENV, "ncu-not-installed-here")
    result = runner.run(make_request(identity_task, CORRECT, Mode.PROFILE))
    assert result.passed, result.message
    profiler = result.phases[-1].profiler
    assert profiler is not None and profiler.tool == "torch"
    assert profiler.note == "ncu not found on PATH"
    assert "Self CPU" in result.benchmarks[0].report  # the torch profiler's table
    assert "torch profiler used (ncu not found on PATH)" in format_report(result)
    assert result.score is None  # a profile is never ranked


def test_only_a_profile_phase_gets_a_profiler(identity_task: Any) -> None:
    result = runner.run(make_request(identity_task, CORRECT, Mode.TEST))
    assert result.passed and result.phases[0].profiler is None


def _profiled(result: RunResult) -> tuple[bytes, str, tuple[str, ...]]:
    assert result.passed, result.message
    profiler = result.phases[-1].profiler
    assert profiler is not None and profiler.tool == "ncu", profiler
    return base64.b64decode(profiler.report), profiler.details, profiler.command


def test_with_ncu_its_report_and_details_come_back(identity_task: Any, fake_ncu: Path) -> None:
    result = runner.run(make_request(identity_task, CORRECT, Mode.PROFILE))
    report, details, command = _profiled(result)
    assert first_line(report) == f"fake report uid={os.getuid()} profiler=ncu"
    assert recorded_argv(report) == list(command[1:])  # what the harness says it ran, it ran
    assert '"custom_kernel","SOL","Duration"' in details
    assert command[0] == str(fake_ncu) and "submission/" in command
    assert command[command.index("--") + 1 :][:3] == (
        sys.executable,
        "-m",
        runner.BUILTIN_HARNESS[1],
    )
    assert "Nsight Compute report attached (profile.ncu-rep" in format_report(result)
    assert result.score is None


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's own user needs a root runner")
def test_ncu_runs_inside_the_sandbox_like_the_submission(
    identity_task: Any, fake_ncu: Path
) -> None:
    result = runner.run(make_request(identity_task, CORRECT, Mode.PROFILE), isolate=True)
    report, details, _ = _profiled(result)
    uid = int(report.decode().split("uid=")[1].split()[0])
    assert uid != 0  # ncu (and the harness it wraps) ran as the sandbox's user
    assert result.system.get("sandbox") == "full"
    assert "custom_kernel" in details  # the import ran in the sandbox as well
