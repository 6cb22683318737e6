"""Profile mode's contracts: what a profile asks Nsight Compute for, and what came back.

A profile run is never ranked. Where `ncu` is on the runner, it wraps the task's main and
captures the submission's kernels; the built-in harness marks the submission's profiled call
with an NVTX range so the harness's own kernels (input generation, the reference) are left
out, and a task's own main is narrowed by the kernel-name filter and launch counts alone.
Elsewhere the torch profiler is used, and the result says why.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from cluster_manager.core.errors import ClusterManagerError

NCU = "ncu"
TORCH = "torch"  # the built-in harness's fallback
TASK = "task"  # a task's own main, profiling its own way
# ncu's --kernel-name-base: which form of a kernel's name the filter is matched against.
NAME_BASES = ("function", "demangled", "mangled")
# Each kernel ncu captures with `--set full` is replayed some forty times: a profile stays
# well inside the phase's timeout with at most this many.
MAX_LAUNCH_COUNT = 50
DEFAULT_LAUNCH_COUNT = 10
MAX_LAUNCH_SKIP = 10_000
MAX_KERNEL_NAME_CHARS = 200
# The HTTP API's multipart fields that carry a filter (ours: popcorn-cli sends only
# benchmark_index), each with the ProfileOptions field it sets.
FORM_FIELDS = {
    "ncu_kernel_name": "kernel_name",
    "ncu_kernel_name_base": "kernel_name_base",
    "ncu_launch_skip": "launch_skip",
    "ncu_launch_count": "launch_count",
}


class InvalidProfileOptions(ClusterManagerError, ValueError):
    """A filter Nsight Compute cannot be given; `option` names the ProfileOptions field, so a
    front end can say which of its own inputs was wrong."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


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
                    "kernel_name", f"kernel name filter: 1 to {MAX_KERNEL_NAME_CHARS} characters"
                )
            try:
                re.compile(self.kernel_name)
            except re.error as exc:
                raise InvalidProfileOptions(
                    "kernel_name", f"kernel name filter: not a regex ({exc})"
                ) from None
        if self.kernel_name_base not in NAME_BASES:
            raise InvalidProfileOptions(
                "kernel_name_base", f"kernel name base: one of {', '.join(NAME_BASES)}"
            )
        if not _whole(self.launch_skip, 0, MAX_LAUNCH_SKIP):
            raise InvalidProfileOptions(
                "launch_skip", f"launch skip: a whole number from 0 to {MAX_LAUNCH_SKIP}"
            )
        if not _whole(self.launch_count, 1, MAX_LAUNCH_COUNT):
            raise InvalidProfileOptions(
                "launch_count", f"launch count: a whole number from 1 to {MAX_LAUNCH_COUNT}"
            )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ProfileOptions:
        data = data or {}
        return cls(
            kernel_name=data.get("kernel_name"),
            kernel_name_base=str(data.get("kernel_name_base", "function")),
            launch_skip=data.get("launch_skip", 0),
            launch_count=data.get("launch_count", DEFAULT_LAUNCH_COUNT),
        )


def chosen_options(
    *,
    kernel_name: str | None = None,
    kernel_name_base: str | None = None,
    launch_skip: int | None = None,
    launch_count: int | None = None,
) -> ProfileOptions | None:
    """The filter a front end's user chose (the defaults for what they left out), or None when
    they chose nothing. A name base alone is refused: ncu would have no name to match."""
    if kernel_name is None and kernel_name_base is not None:
        raise InvalidProfileOptions(
            "kernel_name_base", "kernel name base: only with a kernel name filter"
        )
    if (kernel_name, launch_skip, launch_count) == (None, None, None):
        return None
    return ProfileOptions(
        kernel_name=kernel_name,
        kernel_name_base="function" if kernel_name_base is None else kernel_name_base,
        launch_skip=0 if launch_skip is None else launch_skip,
        launch_count=DEFAULT_LAUNCH_COUNT if launch_count is None else launch_count,
    )


def form_fields(options: ProfileOptions | None) -> dict[str, str]:
    """A filter as the HTTP API's fields: what a client sends for the server to read back."""
    if options is None:
        return {}
    fields = {name: str(getattr(options, option)) for name, option in FORM_FIELDS.items()}
    if options.kernel_name is None:  # no name: no name base either
        del fields["ncu_kernel_name"], fields["ncu_kernel_name_base"]
    return fields


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
