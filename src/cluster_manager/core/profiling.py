"""Profile mode's contracts: what a profile asks Nsight Compute for, and what came back.

A profile run is never ranked. Where `ncu` is on the runner, it wraps the task's main and
captures the submission's kernels; the built-in harness marks the submission's profiled call
with an NVTX range so the harness's own kernels (input generation, the reference) are left
out, and a task's own main is narrowed by the kernel-name filter and launch counts alone.
Elsewhere the torch profiler is used, and the result says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

NCU = "ncu"
TORCH = "torch"  # the built-in harness's fallback
TASK = "task"  # a task's own main, profiling its own way
# ncu's --kernel-name-base: which form of a kernel's name the filter is matched against.
NAME_BASES = ("function", "demangled", "mangled")
# Each kernel ncu captures with `--set full` is replayed some forty times: a profile stays
# well inside the phase's timeout with at most this many.
MAX_LAUNCH_COUNT = 50
DEFAULT_LAUNCH_COUNT = 10
MAX_KERNEL_NAME_CHARS = 200


class InvalidProfileOptions(ValueError):
    pass


@dataclass(frozen=True)
class ProfileOptions:
    """Which kernels Nsight Compute captures (ncu's --kernel-name, --kernel-name-base,
    --launch-skip, --launch-count): by default the first ten of the submission's own."""

    kernel_name: str | None = None  # a regular expression; None: every kernel
    kernel_name_base: str = "function"
    launch_skip: int = 0  # matching launches passed over before the first captured one
    launch_count: int = DEFAULT_LAUNCH_COUNT

    def __post_init__(self) -> None:
        if self.kernel_name is not None:
            if not self.kernel_name or len(self.kernel_name) > MAX_KERNEL_NAME_CHARS:
                raise InvalidProfileOptions(
                    f"kernel name filter: 1 to {MAX_KERNEL_NAME_CHARS} characters"
                )
            try:
                re.compile(self.kernel_name)
            except re.error as exc:
                raise InvalidProfileOptions(f"kernel name filter: not a regex ({exc})") from None
        if self.kernel_name_base not in NAME_BASES:
            raise InvalidProfileOptions(f"kernel name base: one of {', '.join(NAME_BASES)}")
        if not _whole(self.launch_skip, 0, 10_000):
            raise InvalidProfileOptions("launch skip: a whole number from 0 to 10000")
        if not _whole(self.launch_count, 1, MAX_LAUNCH_COUNT):
            raise InvalidProfileOptions(
                f"launch count: a whole number from 1 to {MAX_LAUNCH_COUNT}"
            )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ProfileOptions:
        data = data or {}
        return cls(
            kernel_name=data.get("kernel_name"),
            kernel_name_base=str(data.get("kernel_name_base", "function")),
            launch_skip=data.get("launch_skip", 0),
            launch_count=data.get("launch_count", DEFAULT_LAUNCH_COUNT),
        )


@dataclass(frozen=True)
class ProfilerOutcome:
    """What the profiler of a profile phase left: Nsight Compute's report, or why the torch
    profiler was used instead (`note`)."""

    tool: str  # NCU | TORCH | TASK
    note: str = ""  # why not ncu, or what ncu said when it captured nothing
    report: str = ""  # the .ncu-rep, base64; "" when absent or too big to send
    report_bytes: int = 0
    details: str = ""  # `ncu --import ... --csv --page details`, capped
    command: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProfilerOutcome:
        return cls(**{**data, "command": tuple(data.get("command", ()))})

    def summary(self) -> str:
        """One line for reports: what is attached, or why the torch profiler was used."""
        if self.tool in (TORCH, TASK):
            used = "torch profiler used" if self.tool == TORCH else "the task's main profiled"
            return f"{used} ({self.note})" if self.note else used
        if self.report:
            return f"Nsight Compute report attached (profile.ncu-rep, {self.report_bytes} bytes)"
        if self.report_bytes:
            return f"Nsight Compute report of {self.report_bytes} bytes is too big to attach"
        return f"Nsight Compute captured nothing: {self.note or 'no report written'}"


def _whole(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
