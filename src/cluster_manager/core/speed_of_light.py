"""Speed of light: how close a benchmark case came to what the hardware can do at all.

A task states in task.yml what each benchmark case must do at the least, as formulas over
the case's values (`speed_of_light: {bytes: "3 * size * size * 2", flops: "size * size",
precision: fp16}`, read by `core.formulas`); the GPU registry states each type's peaks
(`peaks:` in gpus.yml), and a runner on a CPU measures its own (`harness/machine_peaks.py`).
From a case's values and its measured mean, computed by the runner outside the submission's
processes, come the achieved bandwidth and FLOP rate and their fraction of the peaks; the
roofline's floor (the case's bytes at peak bandwidth or its FLOPs at the peak rate, whichever
takes longer) is the fastest time physically possible, so a mean below it (over 100 % of
peak) holds a ranked score for review, as a task's `min_time_us` does.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster_manager.core import formulas
from cluster_manager.core.errors import InvalidTaskError
from cluster_manager.core.json_forms import plain_json

SPEED_OF_LIGHT_KEY = "speed_of_light"
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
_WORK_KEYS = ("bytes", "flops")


@dataclass(frozen=True)
class SpeedOfLight:
    """A task's formulas: the bytes each case must move to and from memory, the FLOPs it must
    do, and the precision those FLOPs are done in (which peak rate they count against)."""

    bytes: str | None = None
    flops: str | None = None
    precision: str | None = None

    def work(self, case: Mapping[str, object]) -> tuple[float, float]:
        """The case's bytes and FLOPs (0 for what the task does not state); a FormulaError
        when a formula cannot be computed for it."""
        amounts = []
        for key in _WORK_KEYS:
            text = getattr(self, key)
            amounts.append(0.0 if text is None else formulas.evaluate(formulas.parse(text), case))
        return amounts[0], amounts[1]

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SpeedOfLight | None:
        if not data:
            return None
        return cls(data.get("bytes"), data.get("flops"), data.get("precision"))


def parse_spec(
    raw: object, benchmarks: Sequence[Mapping[str, object]], file: str
) -> SpeedOfLight | None:
    """The task's `speed_of_light` (None when absent), each formula computed for every
    benchmark case: an unknown name, a word where a number belongs or a negative amount is an
    InvalidTaskError naming the file, the key and the case."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise InvalidTaskError(
            file, SPEED_OF_LIGHT_KEY, "must map bytes, flops and precision to their values"
        )
    for key in raw:
        if key not in (*_WORK_KEYS, "precision"):
            raise InvalidTaskError(
                file, f"{SPEED_OF_LIGHT_KEY}.{key}", "unknown key (known: bytes, flops, precision)"
            )
    if not any(raw.get(key) is not None for key in _WORK_KEYS):
        raise InvalidTaskError(file, SPEED_OF_LIGHT_KEY, "states neither bytes nor flops")
    texts = {key: _formula(raw.get(key), benchmarks, file, key) for key in _WORK_KEYS}
    precision = raw.get("precision")
    if precision is not None and precision not in PRECISIONS:
        raise InvalidTaskError(
            file, f"{SPEED_OF_LIGHT_KEY}.precision", f"must be one of {', '.join(PRECISIONS)}"
        )
    if texts["flops"] is not None and precision is None:
        raise InvalidTaskError(
            file, f"{SPEED_OF_LIGHT_KEY}.precision", "needed with flops: which peak they count"
        )
    return SpeedOfLight(texts["bytes"], texts["flops"], precision)


def _formula(
    raw: object, benchmarks: Sequence[Mapping[str, object]], file: str, key: str
) -> str | None:
    if raw is None:
        return None
    where = f"{SPEED_OF_LIGHT_KEY}.{key}"
    try:
        tree = formulas.parse(raw)
    except formulas.FormulaError as exc:
        raise InvalidTaskError(file, where, str(exc)) from None
    for index, case in enumerate(benchmarks):
        amount = _amount(tree, case, file, f"{where} (benchmarks[{index}])")
        if amount < 0:
            raise InvalidTaskError(file, f"{where} (benchmarks[{index}])", f"is {amount:g} < 0")
    return str(raw).strip()


def _amount(tree: ast.expr, case: Mapping[str, object], file: str, where: str) -> float:
    try:
        return formulas.evaluate(tree, case)
    except formulas.FormulaError as exc:
        raise InvalidTaskError(file, where, str(exc)) from None


@dataclass(frozen=True)
class Peaks:
    """What a GPU type can do at most: memory bandwidth in GB/s (1e9 bytes a second) and
    dense FLOP rates per precision in TFLOP/s. `measured`: timed on a CPU runner's machine
    (`harness/machine_peaks.py`), not published: shown, never a ceiling a score is held to
    (a CPU's caches, which the harness does not flush, beat a measured stream)."""

    memory_gbs: float | None = None
    tflops: dict[str, float] = field(default_factory=dict)
    measured: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = plain_json(self)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Peaks | None:
        if not data:
            return None
        return cls(
            data.get("memory_gbs"),
            {str(k): float(v) for k, v in (data.get("tflops") or {}).items()},
            bool(data.get("measured", False)),
        )


def parse_peaks(raw: object) -> Peaks:
    """A registry's `peaks:`; a ValueError says what is wrong with it."""
    if not isinstance(raw, dict) or not set(raw) <= {"memory_gbs", "tflops"}:
        raise ValueError("must map memory_gbs (GB/s) and tflops (precision: TFLOP/s)")
    memory = raw.get("memory_gbs")
    if memory is not None and not _positive(memory):
        raise ValueError("memory_gbs must be a positive number of GB/s")
    rates = raw.get("tflops") or {}
    if not isinstance(rates, dict):
        raise ValueError(f"tflops must map precisions ({', '.join(PRECISIONS)}) to TFLOP/s")
    for precision, rate in rates.items():
        if precision not in PRECISIONS or not _positive(rate):
            raise ValueError(
                f"tflops.{precision}: precisions are {', '.join(PRECISIONS)}, each a positive "
                "number of TFLOP/s"
            )
    return Peaks(None if memory is None else float(memory), {k: float(v) for k, v in rates.items()})


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class CaseSpeed:
    """One timed case against the speed of light: its work, what it achieved, the peaks it
    is measured against (None where the GPU type states none)."""

    bytes: float
    flops: float
    precision: str | None
    bandwidth_gbs: float  # achieved: bytes / mean
    tflops: float  # achieved: flops / mean
    peak_gbs: float | None = None
    peak_tflops: float | None = None
    measured_peaks: bool = False

    @property
    def memory_share(self) -> float | None:
        return _share(self.bytes, self.bandwidth_gbs, self.peak_gbs)

    @property
    def compute_share(self) -> float | None:
        return _share(self.flops, self.tflops, self.peak_tflops)

    @property
    def fraction(self) -> float | None:
        """Of the roofline: the larger of the two shares (the floor over the mean)."""
        shares = [s for s in (self.memory_share, self.compute_share) if s is not None]
        return max(shares) if shares else None

    @property
    def bound(self) -> str:
        """Which peak the case is held to: "memory" or "compute" ("" without peaks)."""
        memory, compute = self.memory_share, self.compute_share
        if memory is None and compute is None:
            return ""
        return "compute" if (compute or 0.0) > (memory or 0.0) else "memory"

    def to_json(self) -> dict[str, Any]:
        """With the derived figures too: what a client of the API reads."""
        data: dict[str, Any] = plain_json(self)
        return data | {"fraction_of_peak": self.fraction, "bound": self.bound or None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> CaseSpeed | None:
        if not data:
            return None
        known = ("bytes", "flops", "precision", "bandwidth_gbs", "tflops", "peak_gbs")
        return cls(
            **{k: data[k] for k in known if k in data},
            peak_tflops=data.get("peak_tflops"),
            measured_peaks=bool(data.get("measured_peaks", False)),
        )


def _share(amount: float, achieved: float, peak: float | None) -> float | None:
    return achieved / peak if amount > 0 and peak else None


def case_speed(
    spec: SpeedOfLight | None,
    case: Mapping[str, object],
    mean_ns: float,
    peaks: Peaks | None,
) -> CaseSpeed | None:
    """The case's figures from its values and its mean; None without formulas, a usable
    mean, or values the formulas can compute (checked when the task was loaded)."""
    if spec is None or not mean_ns > 0:
        return None
    try:
        nbytes, flops = spec.work(case)
    except formulas.FormulaError:
        return None
    seconds = mean_ns / 1e9
    return CaseSpeed(
        bytes=nbytes,
        flops=flops,
        precision=spec.precision,
        bandwidth_gbs=nbytes / seconds / 1e9,
        tflops=flops / seconds / 1e12,
        peak_gbs=None if peaks is None else peaks.memory_gbs,
        peak_tflops=None if peaks is None else peaks.tflops.get(spec.precision or ""),
        measured_peaks=peaks is not None and peaks.measured,
    )


def floor_ns(spec: SpeedOfLight | None, case: Mapping[str, object], peaks: Peaks | None) -> float:
    """The fastest the case can run on these peaks (ns): its bytes at peak bandwidth or its
    FLOPs at the peak rate, whichever takes longer; 0 where nothing bounds it."""
    if spec is None or peaks is None:
        return 0.0
    try:
        nbytes, flops = spec.work(case)
    except formulas.FormulaError:
        return 0.0
    rate = peaks.tflops.get(spec.precision or "")
    memory = nbytes / peaks.memory_gbs if peaks.memory_gbs else 0.0
    compute = flops / (rate * 1e3) if rate else 0.0
    return max(memory, compute)


def speed_review(speeds: Mapping[int, CaseSpeed]) -> str:
    """Why ranked timings are held for review: a case (by its benchmark index) faster than
    its floor, over 100 % of a published peak (a measured one only informs). "" if none."""
    for index, speed in sorted(speeds.items()):
        fraction = None if speed.measured_peaks else speed.fraction
        if fraction is not None and fraction > 1:
            achieved = (
                f"{speed.tflops:.4g} TFLOP/s of {speed.peak_tflops:g} ({speed.precision})"
                if speed.bound == "compute"
                else f"{speed.bandwidth_gbs:.4g} GB/s of {speed.peak_gbs:g}"
            )
            return (
                f"held for review: benchmark {index} ran at {fraction:.0%} of the GPU's peak "
                f"{'FLOP rate' if speed.bound == 'compute' else 'memory bandwidth'} "
                f"({achieved}), faster than physically possible"
            )
    return ""
