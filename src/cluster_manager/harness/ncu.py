"""Nsight Compute in profile mode: the command that wraps the task's main, and its report.

ncu runs inside the sandbox like the submission (it wraps the phase's command, so it is the
sandbox's first process) and follows the harness into its workers (`--target-processes all`).
The built-in harness marks the submission's profiled call with the NVTX range NVTX_RANGE, so
only the submission's kernels are captured; the request's filter (kernel name, launch skip and
count) narrows them further. The report is read back with care (the submission could have
replaced it) and `ncu --import` turns it into text inside the sandbox too.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster_manager.core.profiling import NCU, ProfileOptions, ProfilerOutcome

NCU_ENV = "CLUSTER_MANAGER_NCU"  # the ncu executable, when it is not `ncu` on PATH
# Tells the built-in harness's workers that ncu is watching: no torch profiler (the two
# would fight over CUPTI), an NVTX range around the submission's call instead.
PROFILER_ENV = "CLUSTER_MANAGER_PROFILER"
NVTX_RANGE = "submission"
REPORT_NAME = "profile.ncu-rep"
# The report travels in the RunResult (base64, a third bigger); past this it is left out and
# only its size is said.
MAX_REPORT_BYTES = 3 * 1024 * 1024
MAX_DETAILS_CHARS = 256 * 1024
NOT_FOUND = "ncu not found on PATH"


def find_ncu(env: Mapping[str, str]) -> str | None:
    """The ncu the phase will run, or None when this machine has none."""
    return shutil.which(os.environ.get(NCU_ENV, "ncu"), path=env.get("PATH"))


def ncu_command(
    ncu: str, options: ProfileOptions, report: str, command: Sequence[str], *, nvtx: bool
) -> list[str]:
    """ncu wrapping `command`: every process it starts, the full section set, the kernels the
    request's filter picks (inside the submission's NVTX range when `nvtx`), exported to
    `report`."""
    argv = [ncu, "--target-processes", "all", "--set", "full"]
    if nvtx:
        argv += ["--nvtx", "--nvtx-include", f"{NVTX_RANGE}/"]
    if options.kernel_name is not None:
        argv += ["--kernel-name-base", options.kernel_name_base]
        argv += ["--kernel-name", f"regex:{options.kernel_name}"]
    argv += ["--launch-skip", str(options.launch_skip), "--launch-count", str(options.launch_count)]
    argv += ["--export", report, "--force-overwrite", "--", *command]
    return argv


def details_command(ncu: str, report: str) -> list[str]:
    """The report's details page (every section of every captured kernel) as CSV."""
    return [ncu, "--import", report, "--csv", "--page", "details"]


def read_report(path: Path) -> tuple[int, bytes] | None:
    """The size of the report the sandboxed process wrote and its bytes (none past the cap),
    if it is a plain file: never through a symlink, nor a second name of another file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return None
        return info.st_size, file.read(MAX_REPORT_BYTES + 1)


def outcome(
    command: Sequence[str], report: tuple[int, bytes] | None, details: str, output: str
) -> ProfilerOutcome:
    """What ncu left: the report (when small enough to send), its details, or why nothing
    (ncu's own error lines from the phase's output)."""
    if report is None:
        said = [ln.strip() for ln in output.splitlines() if ln.startswith("==ERROR==")]
        note = "; ".join(said[-3:]) or "no report was written (no kernel matched the filter?)"
        return ProfilerOutcome(tool=NCU, note=note[:500], command=tuple(command))
    size, raw = report
    too_big = max(size, len(raw)) > MAX_REPORT_BYTES
    return ProfilerOutcome(
        tool=NCU,
        note=f"the report is over {MAX_REPORT_BYTES} bytes and is not attached" if too_big else "",
        report="" if too_big else base64.b64encode(raw).decode("ascii"),
        report_bytes=max(size, len(raw)),
        details=details[:MAX_DETAILS_CHARS],
        command=tuple(command),
    )
